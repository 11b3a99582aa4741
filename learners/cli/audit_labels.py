"""`robot-rl audit-labels`: a reward classifier's audit frames + verdicts -> label episodes (learners.rewards.audit).

The loop: a run with `--reward classifier:CLS` logs the frames the classifier called positive (RUN/reward_audit);
a person marks them (`--verdicts FILE`: `<image> success|failure` per line; on the twin `--true-success` stands
in for the person); audit-labels writes label episodes; `robot-rl train-classifier --labels OLD NEW` retrains
with the hard negatives the old labels lacked.

Usage::

    robot-rl audit-labels --audit runs/x/reward_audit --classifier runs/cls --out labels/audit1 --verdicts v.txt
    robot-rl audit-labels --audit runs/fb/reward_audit/forward --classifier runs/cls-fwd --out labels/fwd-audit \\
        --true-success --only-rewarded
    robot-rl train-classifier --labels labels/pick labels/audit1 --out runs/cls2
"""

from __future__ import annotations

import argparse
from pathlib import Path

from learners.rewards.audit import write_audit_labels


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl audit-labels", description=__doc__.split("\n\n")[0])
    p.add_argument("--audit", required=True, nargs="+", type=Path,
                   help="audit directories (RUN/reward_audit: every directory below it with a positives.jsonl is "
                        "read, e.g. a sim run's actor-0, actor-1)")
    p.add_argument("--classifier", required=True, type=Path,
                   help="the classifier directory the run used (its card gives the cameras and image size)")
    p.add_argument("--out", required=True, type=Path, help="label directory to write (must hold no episode files)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--verdicts", type=Path, default=None,
                     help="a person's verdicts: '<image as in positives.jsonl> success|failure' per line")
    src.add_argument("--true-success", action="store_true",
                     help="twin only: the logged true success is the verdict (privileged stand-in for a person)")
    p.add_argument("--only-rewarded", action="store_true",
                   help="only frames the classifier rewarded (the ones that ended an episode)")
    p.add_argument("--all-cameras", action="store_true",
                   help="write every camera the audit PNGs hold (e.g. the policy's beside the classifier's), not only "
                        "the card's: for retraining on another set of cameras")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    res = write_audit_labels(args.audit, args.classifier, args.out, verdicts=args.verdicts,
                             true_success=args.true_success, only_rewarded=args.only_rewarded,
                             all_cameras=args.all_cameras)
    source = "the twin's true success (privileged: a person's stand-in)" if args.true_success else str(args.verdicts)
    skipped = []
    if res.without_png:
        skipped.append(f"{res.without_png} without a PNG")
    if res.superseded:
        skipped.append(f"{res.superseded} whose PNG a later row overwrote")
    print(f"[audit-labels] {res.rows} audit rows{' (' + ', '.join(skipped) + ' skipped)' if skipped else ''}; "
          f"verdicts from {source}")
    print(f"[audit-labels] wrote {res.frames} frames in {res.episodes} episode(s) to {args.out}: success "
          f"{res.success}, failure {res.failure}; the classifier had rewarded {res.rewarded} of them"
          + (f" and called {res.lead} negative (lead frames before a positive)" if res.lead else ""))
    return 0
