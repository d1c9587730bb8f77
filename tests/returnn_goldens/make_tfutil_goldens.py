"""Goldens of RETURNN's TFUtil functions config code calls, for tests/test_tf_util_functions.py: the linear
alignments of transducer configs (get_rnnt_linear_aligned_output, get_linear_alignment_out_to_in_indices) and
the deterministic parts of random warping (gaussian_blur_2d, dense_image_warp with a given flow). Run with
RETURNN's venv from outside this repo: ``cd /tmp && DISABLE_CUDA=1 .bench-venv-returnn/bin/python
/work/main/tests/returnn_goldens/make_tfutil_goldens.py`` (writes tests/data/returnn_tfutil_functions.json)."""
import json
import os

import numpy as np
import tensorflow as tf

from returnn.tf.util.basic import (dense_image_warp, gaussian_blur_2d, get_linear_alignment_out_to_in_indices,
                                   get_rnnt_linear_aligned_output)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "returnn_tfutil_functions.json")


def main():
    tf.compat.v1.disable_eager_execution()  # RETURNN's TFUtil runs in graph mode
    sess = tf.compat.v1.Session()
    rng = np.random.RandomState(1)
    cases = []
    for i in range(40):
        b = rng.randint(1, 4)
        in_lens = rng.randint(0, 9, size=b)
        t_lens = rng.randint(0, 6, size=b)
        targets = rng.randint(1, 7, size=(b, int(t_lens.max())))  # as wide as the longest (RETURNN needs that)
        consume = i % 3 == 0
        if consume:
            in_lens = np.maximum(in_lens, t_lens)
        args = dict(input_lens=in_lens.tolist(), targets=targets.tolist(), target_lens=t_lens.tolist(),
                    blank_label_idx=int(i % 2) * 7, pad_value=int(i % 4 == 1) * -1, targets_consume_time=bool(consume))
        out, lens = get_rnnt_linear_aligned_output(
            tf.constant(in_lens, tf.int32), tf.constant(targets.reshape(b, -1), tf.int32), tf.constant(t_lens, tf.int32),
            args["blank_label_idx"], pad_value=args["pad_value"], targets_consume_time=consume)
        idx = get_linear_alignment_out_to_in_indices(tf.constant(in_lens, tf.int32), tf.constant(t_lens, tf.int32),
                                                     pad_value=-1)
        out, lens, idx = sess.run((out, lens, idx))
        cases.append(dict(args=args, out=out.tolist(), out_lens=lens.tolist(), indices=idx.tolist()))
    warps = []
    for i in range(6):
        b, h, w, c = 2, rng.randint(2, 9), rng.randint(2, 7), rng.randint(1, 3)
        image = rng.normal(size=(b, h, w, c)).astype("float32")
        flow = (rng.normal(size=(b, h, w, 2)) * [2.0, 1.5]).astype("float32")
        blur_std = [1.0, 2.0, (1.0, 0.5)][i % 3]
        warped, blurred = sess.run((dense_image_warp(tf.constant(image), tf.constant(flow)),
                                    gaussian_blur_2d(tf.constant(flow), kernel_std=blur_std)))
        warps.append(dict(image=image.tolist(), flow=flow.tolist(), blur_std=blur_std, warped=warped.tolist(),
                          blurred=blurred.tolist()))
    with open(OUT, "w") as f:
        json.dump({"alignment": cases, "warp": warps}, f)
    print("wrote %s (%i + %i cases)" % (OUT, len(cases), len(warps)))


if __name__ == "__main__":
    main()
