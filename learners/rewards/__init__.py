"""Rewards: the run-time reward model (`reward_model`: classifier / human / env sources, k-frame gates), the reward
classifier (`classifier`), its labelled data (`labels`), metrics (`metrics`), training (`training`) and the
audit -> relabel loop (`audit`). Nothing is imported here.
"""
