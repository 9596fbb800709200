from stackbot.cli.main import main

raise SystemExit(main())
