import sys
from pathlib import Path

# The demo's code lives beside its tests; make `import cart` work from any folder.
sys.path.insert(0, str(Path(__file__).parent))
