"""Replay: `buffer` (ReplayBuffer with uint8 frames stored once, MixedSampler for RLPD's demo/online halves,
route_transition) and `prefetch` (BatchPrefetcher / BatchSource: the next batch drawn in a thread). Nothing is
imported here.
"""
