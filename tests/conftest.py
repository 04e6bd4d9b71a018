import os
import sys
from pathlib import Path

# Two test workers share two cores: one torch thread each. Two pools of OpenMP
# threads spinning on the same cores made the in-process checks up to 15x slower.
os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).parent))
