from usenet_indexer.cli import main

raise SystemExit(main())
