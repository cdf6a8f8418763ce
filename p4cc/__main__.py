import sys

from p4cc.cli import main

sys.exit(main())
