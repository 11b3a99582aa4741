"""Where reward classifiers put pick-cube's 5 cm line, on the scripted expert's frames, beside what the pixels hold.

The scripted expert (as `robot-rl record-labels --lift-cm 3 8 --hold-steps 25 --back-out-slowdown 3` drives it, on
seeds no label set used) lifts the cube to a random 3-8 cm, holds it and backs out slowly, so its frames cross the
line both ways. Per frame the benchmark keeps the cameras' images and two privileged twin-only facts: the cube
bottom's height above the table and the task's true success. Then:

- what the pixels hold: per camera in `--row-cameras` (default the twin's `level`, at the line's height), the lowest
  image row with a cube-coloured pixel (green well above red and blue), and per such row the frames' height range
  and true-success share. A row that holds only successes and one that holds only failures, meeting at the line,
  mean the camera shows the line as one row: a classifier could read it exactly;
- per classifier (`--classifiers NAME=DIR ...`): precision / recall at its card's threshold over all the frames, and
  the share called a success per height band of the cube's bottom (`BANDS_CM`), so how sharp its boundary is.

    python benchmarks/classifier_line_profile.py --classifiers old=W/cls new=W/cls_level --segments 60

Writes benchmarks/results/classifier_line_profile[_LABEL].json and prints the tables.
"""

from __future__ import annotations

import time
from typing import Any

from _prelude import (
    add_classifiers,
    add_label,
    add_out_dir,
    bench_parser,
    host_info,
    named_classifiers,
    print_table,
    result_name,
    set_env_defaults,
    timestamp,
    write_json,
)

set_env_defaults(one_thread=True)

import numpy as np  # noqa: E402

BANDS_CM = ((3.0, 4.0), (4.0, 4.5), (4.5, 4.8), (4.8, 5.0), (5.0, 5.2), (5.2, 5.5), (5.5, 6.0), (6.0, 7.0),
            (7.0, 9.0))
"""Bands (cm) of the cube bottom's height above the table; the success line is 5 cm (held)."""
LIFT_M = (0.03, 0.08)


def expert_frames(cameras: tuple[str, ...], segments: int, seed: int, image_size: int) -> dict[str, Any]:
    """{camera: uint8 (N, S, S, 3)}, "height_cm" (N,), "truth" (N,) over `segments` scripted expert segments."""
    from demos.devices.teleop import make_device
    from demos.recording.labels import (
        BackOutAfterSuccess,
        InfoLabeler,
        SegmentLimits,
        make_continuing_env,
        record_segment,
    )
    from envs.tasks import CUBE_HALF_SIZE_M

    env, task_success = make_continuing_env("twin-pick-cube", obs_mode="pixels", image_size=image_size,
                                            camera_names=cameras)
    robot_env = env.unwrapped
    frames: dict[str, list[np.ndarray]] = {c: [] for c in cameras}
    heights: list[float] = []
    truth: list[bool] = []
    step = env.step

    def recording_step(action: Any) -> Any:
        obs, reward, terminated, truncated, info = step(action)
        heights.append(100.0 * (float(np.asarray(robot_env.last_state.objects["cube_pos"])[2]) - CUBE_HALF_SIZE_M))
        truth.append(bool(info.get("success", False)))
        for c in cameras:
            frames[c].append(obs["images"][c])
        return obs, reward, terminated, truncated, info

    env.step = recording_step
    device = make_device("scripted", task="twin-pick-cube", seed=seed, lift_m=LIFT_M)
    driver = BackOutAfterSuccess(hold_steps=25, slowdown=3)
    try:
        for s in range(segments):
            record_segment(env, device, InfoLabeler(), task_success, seed=seed + s,
                           limits=SegmentLimits(after_success=8, max_frames=400), driver=driver)
    finally:
        env.close()
    return {"images": {c: np.stack(v) for c, v in frames.items()}, "height_cm": np.asarray(heights),
            "truth": np.asarray(truth)}


def lowest_cube_rows(images: np.ndarray, height_cm: np.ndarray, truth: np.ndarray) -> list[dict[str, Any]]:
    """Per lowest cube-coloured image row (frames 3-9 cm up): frames, height range (cm), true-success share."""
    px = images.astype(np.int32)
    cube: np.ndarray = (px[..., 1] > px[..., 0] + 25) & (px[..., 1] > px[..., 2] + 25)
    any_row: np.ndarray = np.any(cube, axis=2)  # (N, H): the row holds a cube-coloured pixel
    lowest = np.where(np.any(any_row, axis=1), images.shape[1] - 1 - np.argmax(any_row[:, ::-1], axis=1), -1)
    near = (height_cm >= 3.0) & (height_cm < 9.0) & (lowest >= 0)
    rows = []
    for r in sorted(set(lowest[near].tolist())):
        m = near & (lowest == r)
        rows.append({"row": int(r), "frames": int(m.sum()), "height_cm_min": float(height_cm[m].min()),
                     "height_cm_max": float(height_cm[m].max()), "true_share": float(truth[m].mean())})
    return rows


def judge(data: dict[str, Any], directory: str) -> dict[str, Any]:
    """One classifier at its card's threshold: precision / recall over all frames, positive share per band."""
    from learners.rewards.classifier import load_classifier
    from learners.rewards.metrics import binary_metrics

    clf = load_classifier(directory)
    probs = clf.predict_proba({c: data["images"][c.split("/", 1)[1]] for c in clf.card.cameras})
    pos, h = probs >= clf.card.threshold, data["height_cm"]
    metrics = binary_metrics(probs, data["truth"], clf.card.threshold)
    bands = []
    for lo, hi in BANDS_CM:
        band = (h >= lo) & (h < hi)
        bands.append({"lo_cm": lo, "hi_cm": hi, "frames": int(band.sum()),
                      "positive_share": float(pos[band].mean()) if band.any() else None})
    return {"classifier": directory, "cameras": list(clf.card.cameras), "threshold": float(clf.card.threshold),
            "conv_strides": list(clf.card.model_config().strides()),
            **{k: metrics[k] for k in ("tp", "fp", "fn", "precision", "recall")}, "bands": bands,
            "label_sources": [s.get("directory") for s in clf.card.label_sources],
            "train_seconds": clf.card.training.get("total_seconds"), "train_steps": clf.card.training.get("steps")}


def main() -> None:
    p = bench_parser(__doc__)
    add_classifiers(p)
    p.add_argument("--segments", type=int, default=60, help="scripted expert segments")
    p.add_argument("--seed", type=int, default=70_000, help="env seed of the first segment")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--row-cameras", default="level", help="cameras whose lowest cube row is tabled")
    add_label(p)
    add_out_dir(p)
    args = p.parse_args()
    named = named_classifiers(p, args)
    from learners.rewards.classifier import read_card

    cams = {c.split("/", 1)[1] for _, d in named for c in read_card(d).cameras}
    cams |= {c for c in args.row_cameras.split(",") if c}
    t0 = time.time()
    data = expert_frames(tuple(sorted(cams)), args.segments, args.seed, args.image_size)
    record_s = time.time() - t0
    h, truth = data["height_cm"], data["truth"]
    print(f"{len(h)} frames in {args.segments} segments ({record_s:.0f} s), {int(truth.sum())} truly successful")
    rows = {c: lowest_cube_rows(data["images"][c], h, truth) for c in args.row_cameras.split(",") if c}
    for cam, table in rows.items():
        print_table(f"{cam}: lowest cube row   frames   height cm       true share",
                    [f"{r['row']:>22d} {r['frames']:>8d}   {r['height_cm_min']:5.2f}-{r['height_cm_max']:5.2f}"
                     f"   {r['true_share']:10.2f}" for r in table])
    arms = [{"name": name, **judge(data, d)} for name, d in named]
    bands = " ".join(f"{lo:g}-{hi:g}".rjust(8) for lo, hi in BANDS_CM)
    print_table(f"{'classifier':<14} {'thr':>5} {'P':>6} {'R':>6} " + bands,
                [f"{a['name']:<14} {a['threshold']:5.3f} {a['precision'] or 0:6.3f} {a['recall'] or 0:6.3f} "
                 + " ".join(f"{b['positive_share'] if b['positive_share'] is not None else 0:8.2f}"
                            for b in a["bands"]) for a in arms])
    out = args.out / f"{result_name('classifier_line_profile', args.label)}.json"
    write_json(out, {"benchmark": "classifier_line_profile", "task": "twin-pick-cube", "time": timestamp(),
                     **host_info(), "args": {**vars(args), "out": str(args.out)}, "frames": len(h),
                     "true_frames": int(truth.sum()), "record_s": record_s, "lowest_cube_rows": rows, "arms": arms})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
