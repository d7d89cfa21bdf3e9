"""Pure codecs of what crosses a wire or a disk: batches, spool frames, fragments, capped inflate."""
