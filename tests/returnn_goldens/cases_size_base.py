"""Golden cases of reinterpret_data with size_base after upsampling (i6 conformers' auxiliary losses): RETURNN
takes the base's sizes and keeps the values as they are, frames past the base's longest sequence included; a
layer after it that reads those frames (a conv) sees them."""
from make_goldens import case

_UP = {
    "down": {"class": "conv", "from": "data", "filter_size": [3], "strides": [3], "padding": "same", "n_out": 4},
    "up": {"class": "transposed_conv", "from": "down", "filter_size": [3], "strides": [3], "n_out": 4,
           "activation": "relu"},
    "frames": {"class": "reinterpret_data", "from": "up", "size_base": "data"}}
case("size_base_after_upsampling", "size_base", dict(_UP, output={"class": "copy", "from": "frames"}))
case("size_base_then_conv_reads_past_frames", "size_base", dict(_UP, output={
    "class": "conv", "from": "frames", "filter_size": [3], "padding": "same", "n_out": 2}))
# RETURNN fails: its mask is as long as the longest sequence, the values 9 frames
# case("size_base_then_reduce", "size_base", dict(_UP, output={
#     "class": "reduce", "mode": "max", "axis": "T", "from": "frames"}))
