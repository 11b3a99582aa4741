"""One-process training: `online` (train_online, evaluate), `warm_start` (WSRL), `forward_backward` and
`forward_backward_run` (reset-free training with two agents), `gym_compat` (any gymnasium env's traits),
`run_state` (save / restore a whole run). Nothing is imported here.
"""
