"""More whole-run comparison configs (see ``engine_run_configs.py`` for the format): training keys found
by ``benchmarks/returnn_fuzz_engine.py`` whose effect no case of ``engine_run_configs.py`` showed.
``engine_run_cases.CASES`` holds these too."""
from __future__ import annotations

from typing import Dict, Tuple

from engine_run_configs import FF, LSTM

CASES: Dict[str, Tuple[str, str, str]] = {
    # reinit_network_each_epoch: RETURNN builds network and updater anew each epoch (init_new_network), the
    # parameters and the global step carried over: Adam's slots and beta powers start fresh every epoch
    "reinit_each_epoch": ("", "", FF + """
num_epochs = 3
batch_size = 60
max_seqs = 6
optimizer = {"class": "adam"}
reinit_network_each_epoch = True
learning_rate = 0.01
learning_rate_control = "constant"
"""),
}
# inc_seq_length: RETURNN adds it to an int max_seq_length before every train epoch (epoch e: 4 + 3 * e);
# the dev set is filtered by the grown limit too (a recurrent net: frame-wise batches have no length limit)
CASES["inc_seq_length"] = ("", "", LSTM + """
num_epochs = 3
batch_size = 20
max_seqs = 4
max_seq_length = 4
inc_seq_length = 3
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "constant"
""")
# ... but its first addition makes a float max_seq_length of a float inc_seq_length, never grown after
CASES["inc_seq_length_float"] = ("", "", LSTM + """
num_epochs = 2
batch_size = 20
max_seqs = 4
max_seq_length = 6
inc_seq_length = 3.0
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "constant"
""")
