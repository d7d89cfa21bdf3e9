"""Pure decoders of what a probe fetches: yEnc bodies, PAR2 packets, NFO text, archive headers.

Bytes in, values out: no I/O, no clock (checked by tests/test_purity.py).
"""
