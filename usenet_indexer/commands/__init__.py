"""One module per `uidx` subcommand: `add_parser(subparsers)` and `run(args)`."""
