"""Typed configuration of the SAC / RLPD / DrQ agent, with named presets and their sources.

One frozen dataclass (`AgentConfig`) covers the state and the image (DrQ) paths and the optional discrete gripper
head; an agent is built from an `EnvSpec` plus this config (`learners.agents.sac.SACAgent(spec, cfg)`; the actor side
builds only the policy: `learners.agents.policy.build_policy(spec, cfg)`).

Defaults (`AgentConfig()`) are SERL's image-based DrQ/RLPD recipe (../shared/REFERENCE.md, "Algorithm defaults"):
critic ensemble 10 with a random subset of 2 for the target min (REDQ / RLPD), 4 critic updates per actor update,
batch 256 (the RLPD sampler draws 128 demo + 128 online), discount 0.97 (SERL 0.96-0.99, HIL-SERL 0.97-0.985),
Adam 3e-4 everywhere, tau 0.005, temperature init 1e-2, target entropy -dim(A)/2, no backup entropy, MLPs
[256, 256] with LayerNorm, tanh-Gaussian policy with std in [1e-5, 5], random-shift augmentation with pad 4,
a frozen ResNet-10 (GroupNorm) per camera with a trainable spatial-embedding head (8 features -> dropout 0.1 ->
dense 256 -> LayerNorm -> tanh) and a proprio branch (dense 64 -> LayerNorm -> tanh). MLP activation: swish
(SERL's `MLP` default; RLPD's reference code uses ReLU).

Presets::

    drq_config()          # == AgentConfig(): SERL DrQ/RLPD image defaults
    rlpd_state_config()   # state-based RLPD: discount 0.99, critic updates per actor update 8 (SERL state SAC)
    hil_serl_config()     # HIL-SERL: ensemble 2 (no subset), 2 critic updates per actor update, gripper DQN head
    sac_config()          # classic SAC: twin critics, UTD 1, temperature init 1, target entropy -dim(A)
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterable
from typing import Any

from robot_rl.config import Config, require
from robot_rl.errors import ConfigError

ENCODERS = ("resnet10", "resnet18", "conv")
ENCODER_FEATURES = ("spatial", "targets", "both")
ACTIVATIONS = ("silu", "relu", "tanh", "gelu")
BACKENDS = ("torch", "jax")
CRITIC_LOSSES = ("mse", "hl_gauss")
MIXED_PRECISION = ("off", "bf16")
MATMUL_PRECISIONS = ("default", "high", "highest")
DEVICE_REPLAY_MODES = ("auto", "on", "off")
FEATURE_CACHE_MODES = ("auto", "on", "off")
FEATURE_CACHE_DEVICES = ("auto", "host", "device")
FEATURE_CACHE_DTYPES = ("float16", "float32")
BC_ARM_FILTERS = ("joint", "own", "off")
CUDA_GRAPHS_MODES = ("auto", "on", "off")
BACKBONE_PRECISIONS = ("float32", "bf16")


@dataclasses.dataclass(frozen=True)
class AgentConfig(Config):
    """SAC-family agent (SAC, RLPD, DrQ, optional HIL-SERL gripper head). Defaults: SERL DrQ/RLPD (see module)."""

    # --- inputs
    state_select: tuple[str, ...] = ()
    """Use only these state leaves / elements (learners.agents.obs: 'leaf', 'leaf[i]', 'leaf[a:b]'); () = all of them.
    E.g. ('object', 'state[0:3]') on the twin: the object state and the TCP position, without the orientation,
    twist, gripper and wrench that a few demos let a network memorise episodes by."""
    obs_norm: bool = False
    """Normalise the state vector (after state_select and state_scale) per element by a mean and std from data:
    `robot-rl train --obs-norm` sets them from the demos and the first online transitions before learning starts
    (SACAgent.set_state_normalization); clipped to +-10. For envs whose readings differ in scale (a gripper at
    0-255 beside positions in metres)."""
    state_scale: float = 1.0
    """Multiply the state vector by this before the networks: Adam moves every weight by about the learning rate
    per step, so inputs of ~0.1 (positions in metres) are learned ~10x slower than unit-sized ones."""

    # --- networks
    hidden_dims: tuple[int, ...] = (256, 256)
    """Hidden layer sizes of the actor MLP and of every critic ensemble member."""
    layer_norm: bool = True
    """LayerNorm after every hidden layer (actor and critics); RLPD's key stabiliser."""
    activation: str = "silu"
    """Hidden activation: silu (swish, SERL's default), relu, tanh or gelu."""
    ensemble_size: int = 10
    """Number of independent critics (each with its own output layer)."""
    ensemble_subsample: int | None = 2
    """Size of the random subset of target critics whose min is the target (REDQ/RLPD); None = min over all."""
    std_min: float = 1e-5
    """Lower bound of the policy's std (bounded smoothly through a tanh on the log-std)."""
    std_max: float = 5.0
    """Upper bound of the policy's std."""

    # --- optimisation
    batch_size: int = 256
    """Minibatch size of one critic update; `update()` takes critic_updates_per_actor_update x this many rows."""
    critic_updates_per_actor_update: int = 4
    """Critic (+ target) updates per actor/temperature update within one `update()` call (SERL's utd_ratio)."""
    discount: float = 0.97
    """Discount factor gamma."""
    n_step: int = 1
    """Multi-step returns: the critic targets sum up to this many rewards of the stored episode before
    bootstrapping (learners.replay.buffer.ReplayBuffer.gather); 1 = the one-step SAC target."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor (and of the gripper head)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics and of the image encoders' trainable parts."""
    temperature_lr: float = 3e-4
    """Adam learning rate of the log-temperature."""
    tau: float = 0.005
    """Soft target update rate: target <- tau * online + (1 - tau) * target, after every critic update."""
    temperature_init: float = 1e-2
    """Initial entropy temperature alpha."""
    target_entropy: float | None = None
    """Target entropy of the continuous policy; None = target_entropy_per_dim x dim (continuous dims only)."""
    target_entropy_per_dim: float = -0.5
    """Target entropy per continuous action dim when target_entropy is None (SERL/HIL-SERL: -1/2)."""
    learn_temperature: bool = True
    """Learn alpha toward the target entropy (False keeps it at temperature_init)."""
    backup_entropy: bool = False
    """Subtract gamma * alpha * log pi(a'|s') in the critic target (off in SERL/HIL-SERL)."""
    grad_clip_norm: float | None = None
    """Clip each network's gradient to this global L2 norm (None = no clipping)."""
    bc_weight: float = 0.0
    """Behaviour-cloning term in the actor loss: bc_weight x mean squared error between the policy's mode
    tanh(mean) and the stored action, over the batch rows marked as human actions (`intervention`: demo steps
    and interventions), arm dims only. 0 (default) = pure SAC/RLPD; see learners.agents.sac for when it helps."""
    bc_q_filter: bool = False
    """Q-filtered behaviour cloning (Nair et al. 2018): the BC term counts a human row only while the critic rates
    the stored action above the policy's own (ensemble-mean Q(s, a_human) > Q(s, tanh(mean))), so the cloning
    fades state by state as the policy overtakes the demos instead of capping it. Needs bc_weight > 0."""

    bc_q_filter_gripper: bool = False
    """With bc_q_filter, on an action whose last dim is a continuous gripper command: filter that dim on its own, by
    whether the critic prefers the human's gripper command with the policy's own arm motion (learners.agents.bc);
    the arm dims keep the joint filter. Off: the joint filter decides for the gripper too. Ignored without
    bc_q_filter and with gripper_head (whose gripper is a discrete head outside the BC term)."""
    bc_q_filter_arm: str = "joint"
    """With bc_q_filter, how the arm dims (all but the last) of a human row are filtered (learners.agents.bc):
    'joint' (the whole human action against the mode, Q(s, a_human) > Q(s, mode)), 'own' (the human's arm motion
    with the policy's own gripper command, Q(s, [a_human_arm, mode_gripper]) > Q(s, mode): a gripper dim the
    critic rates arbitrarily, as where the task locks the gripper, does not sway it) or 'off' (cloned on every
    human row; only with bc_q_filter_gripper, which then filters the gripper dim alone)."""
    bc_q_filter_start: int = 0
    """Agent updates before the BC term's Q filters apply (env steps x updates per env step): until then every
    human row is cloned, while the critic learns to rank actions (a filter on an untrained critic drops rows at
    random). 0: from the first update. Ignored without a filter."""
    bc_q_filter_floor: float = 0.0
    """Weight in the BC term of a human row (arm and gripper parts alike) the Q filter drops, relative to a kept
    row: 0 (default) drops it, 1 is no filter. A floor keeps some pull toward the demos where the critic rates the
    policy's own action higher, which it does on nearly every demo state once the actor sits at the critic's
    maximum (peg-insert's recipe: 0.1)."""

    mc_lower_bound: bool = False
    """Lower-bound every critic target by the row's Monte-Carlo return where it is known: target = max(r + gamma^k
    Q', G), G = the discounted reward sum from the row to the end of its stored episode once that episode has
    terminated (learners.replay.buffer.ReplayBuffer.track_returns; the samplers keep G when this is on). A return
    actually
    collected is a floor under the value of its first action (rewards >= 0 after it: the terminal ends them), so
    the demos' successes, and the policy's own, count at once instead of waiting for the bootstrap to carry them
    back, and a critic that rates the policy's actions above the demo's on demo states (the over-estimation
    measured in benchmarks/insertion_diagnosis.py on pick-cube) is corrected where the demos show better. In the
    spirit of Cal-QL's calibration (Nakamoto et al. 2023), without its conservative term. Rows of truncated or
    unfinished episodes keep the plain target."""

    # --- critic loss (Farebrother et al. 2024, "Stop Regressing: Training Value Functions via Classification")
    critic_loss: str = "mse"
    """'mse': each critic regresses its scalar Q on the target (SERL/RLPD). 'hl_gauss': each critic outputs
    hl_gauss_bins logits over a fixed value support, Q = sum(softmax(logits) x bin centres), trained by
    cross-entropy toward the target's Gaussian (N(target, sigma) integrated over each bin, the target clipped into
    the support). Everything that reads Q (the target min, the actor loss, the BC Q filter, mc_lower_bound) uses
    that expected value. The gripper DQN head stays MSE either way. A fresh hl_gauss critic starts near Q = 0 (its
    output bias is the log of the projection of 0, clipped into the support), like a fresh MSE critic."""
    hl_gauss_bins: int = 101
    """hl_gauss: number of value bins (equal width) over the support (the paper: 51-101)."""
    hl_gauss_range: tuple[float, float] | None = None
    """hl_gauss: the value support (v_min, v_max) the bins cover; targets outside it are clipped (the metric
    hl_gauss_clipped_share counts them). None = derived for rewards in [0, 1] (the twin's success reward, reward
    classifiers): the values [0, 1/(1 - discount)] widened on each side by 3 sigma, i.e. bin width
    w = (1/(1 - discount)) / (bins - 6 x sigma_ratio) and support [-3 sigma, 1/(1 - discount) + 3 sigma] with
    sigma = sigma_ratio x w (so 0 and the maximum keep 99.9 % of their Gaussian; a target within ~1.5 sigma of an
    edge is pulled inward by the cut). Needs discount < 1. Set it for other reward scales; for sparse tasks that
    terminate on success (values in [0, 1]) a tight range such as -0.5,1.5 gives finer bins."""
    hl_gauss_sigma_ratio: float = 0.75
    """hl_gauss: std of the target Gaussian in bin widths (the paper's recommended 0.75)."""

    # --- residual RL (Ankile et al., "Residual Off-Policy RL for Finetuning Behavior Cloning Policies")
    residual_base: str | None = None
    """A frozen base policy (learners.agents.residual: a `robot-rl train-bc` or `robot-rl train` run directory or
    checkpoint, a policy .safetensors file, or 'py:MODULE:FACTORY'); the actor then sees the observation's features
    and the base's action and outputs a correction in [-1, 1], executed as clip(base + residual_scale x correction,
    -1, 1); the critic scores the executed (combined) action. The correction starts at zero (the agent starts as the
    base plus exploration noise). Continuous actions only (not with gripper_head). None = the actor acts alone."""
    residual_scale: float = 0.2
    """Bound of the residual correction, in the agent's [-1, 1] action units (0.2 = a fifth of the action range)."""

    # --- images (DrQ path; used only when the observation has cameras)
    encoder: str = "resnet10"
    """Per-camera backbone: 'resnet10' (SERL's GroupNorm ResNet-10), 'resnet18' (torchvision's ResNet-18), both
    with weights from encoder_weights, or 'conv' (small, trained from scratch)."""
    encoder_weights: str | None = None
    """Local safetensors file with the backbone weights (learners.agents.backbones; `robot-rl convert-encoder`
    writes one from torchvision's .pth or SERL's resnet10_params.pkl, `robot-rl pretrain-encoder` from episodes)."""
    freeze_encoder: bool = True
    """Freeze the ResNet backbone (only the spatial-embedding head trains); ignored for 'conv'."""
    conv_channels: tuple[int, ...] = (32, 64, 128, 256)
    """Channels of the small conv backbone (3x3 convs, stride 2, valid padding: SERL's SmallEncoder)."""
    encoder_features: str = "spatial"
    """What a camera contributes to the features: 'spatial' = the trainable head over the backbone's feature map
    (spatial embeddings -> dense -> LayerNorm -> tanh); 'targets' = the predictions of the frozen target head that
    `robot-rl pretrain-encoder` stored in encoder_weights (per camera: TCP position now, at the next gripper event,
    and the second relative to the first, standardised: where the arm and the object are), nothing trainable;
    'both' = the two concatenated. 'targets' / 'both' need a frozen ResNet with such a file, and the torch
    backend."""
    encoder_pretrain_steps: int = 0
    """With cameras and no encoder_weights: `robot-rl train` and `robot-rl learner` first pretrain the encoder on the
    run's demos for this many steps (`robot-rl pretrain-encoder`'s objective and defaults, the run's seed) into
    OUT/encoder.safetensors, reused when the run resumes, and freeze it (learners.training.pretrain_encoder
    `with_run_encoder`); 0: no pretraining. The default for a task on the arm env with cameras and demos
    (learners.agents.recipes TASK_DEFAULTS)."""
    num_spatial_features: int = 8
    """Learned spatial embeddings per channel in the encoder head."""
    encoder_dropout: float = 0.1
    """Dropout in the encoder head (training only)."""
    image_latent_dim: int = 256
    """Per-camera feature size after the head (dense -> LayerNorm -> tanh)."""
    proprio_latent_dim: int = 64
    """Proprio branch size (dense -> LayerNorm -> tanh) when there are cameras; 0 = feed the raw state."""
    augment_pad: int = 4
    """Random-shift augmentation: edge-pad by this many pixels and crop back (0 = off)."""
    feature_cache: str = "auto"
    """Frozen backbones only (learners.replay.feature_cache): compute each stored frame's backbone output once (new
    frames in batches of 16 at sampling time), for `feature_cache_crops` random-shift crops, and train the heads on
    those; a learner-side thing (actors run the backbone on live frames; checkpoints unchanged). 'auto' = on when
    every camera backbone is frozen, the backend is torch and the estimate fits `feature_cache_budget_gb` (else off,
    with a note); 'on' = the same but refuses (ConfigError) instead of falling back; 'off' = the backbone runs on
    every batch."""
    feature_cache_crops: int = 4
    """Random-shift crops cached per frame (K; one of the K drawn per row at sample time). With augment_pad = 0 the
    cache holds the one unshifted frame whatever this says."""
    feature_cache_dtype: str = "float16"
    """Storage dtype of the cached backbone outputs: 'float16' (half the memory; features are cast back to float32
    for the heads) or 'float32' (bit-equal to running the backbone on the same crops)."""
    feature_cache_budget_gb: float = 8.0
    """Memory budget of the feature cache in GB (1e9 bytes), over the frames the run can store in both buffers."""
    feature_cache_device: str = "auto"
    """Where the cached outputs live: 'device' = torch tensors on the agent's device (on a GPU a batch's rows are
    gathered there: the update touches no image or feature bytes on the host), 'host' = numpy arrays (copied per
    batch), 'auto' = the device on a CUDA agent when the estimate also fits half the GPU's free memory, else host."""
    backbone_precision: str = "float32"
    """Frozen backbones only: 'bf16' runs their forward pass (the per-batch one, and the feature cache's encoding)
    under torch.autocast(bfloat16) and casts the output back to float32 for the trainable heads; 'float32' = as the
    rest of the network. Independent of mixed_precision (which covers every forward pass). Torch backend only."""
    channels_last: bool = False
    """Frozen backbones only: keep their convolution weights (and so their activations) in the channels-last
    memory layout, which cuDNN's convolutions prefer on recent GPUs. Torch backend only; results equal within
    float rounding."""

    # --- discrete gripper head (HIL-SERL)
    gripper_head: bool = False
    """Treat the last action dim as a discrete gripper {-1, 0, +1} learned by a double-DQN head (robot-rl envs:
    +1 closes, -1 opens, 0 keeps the current command)."""
    gripper_hidden_dims: tuple[int, ...] = (128, 128)
    """Hidden sizes of the gripper Q network (HIL-SERL: [128, 128] with LayerNorm)."""
    gripper_flip_penalty: float = -0.02
    """Penalty for a gripper flip (HIL-SERL -0.02): the value entry points give envs.wrappers.GripperPenaltyWrapper,
    which stores it per transition as `grasp_penalty`."""
    gripper_epsilon: float = 0.0
    """Epsilon-greedy exploration of the gripper head when acting stochastically (HIL-SERL: 0, humans explore)."""

    # --- runtime
    backend: str = "torch"
    """Learner backend: 'torch' (learners.agents.sac) or 'jax' (learners.agents.jax.agent: the same update as one
    jitted JAX
    function; needs the `jax` extra). Replay, demos, recipes and checkpoints are shared; actors always run the
    torch policy, whichever backend trains it."""
    compile: bool = False
    """torch.compile the loss functions (opt-in; first updates are slow while it compiles)."""
    device: str = "auto"
    """'auto' (cuda when available, else cpu), 'cpu', 'cuda', 'cuda:1', ..."""
    mixed_precision: str = "off"
    """'off' or 'bf16': the networks' forward passes under torch.autocast(bfloat16) (matmuls and convolutions in
    bf16; losses, targets, log-probabilities, weights and optimizer state stay float32; bf16 needs no loss
    scaling). For a GPU with bf16 (Ampere or newer); allowed on a CPU, where it is slow unless the CPU has AMX.
    Torch backend only. Not a default: on an H100 it was slower (0.82x state, 0.87x image; README "On a GPU")."""
    matmul_precision: str = "high"
    """Float32 matmuls and convolutions of the torch update on a CUDA device (learners.agents.precision): 'high' =
    TF32 tensor cores for both, 'highest' = true float32 for both, 'default' = as torch has them (float32 matmuls,
    TF32 convolutions). Applied for each update and restored after; no effect on a CPU. Default 'high': on an H200
    it gave 1.09x (state, CUDA graphs) and 1.35x (two cameras, feature cache + graphs) over 'default'
    (benchmarks/results/learner_speed_cuda_h200_*.json); JAX computes float32 matmuls on a GPU in TF32 too."""
    prefetch: bool | None = None
    """Draw the next batch in a background thread while the current update runs, into pinned memory, copied to the
    device on a side stream (learners.replay.prefetch). None = where it helps: the torch backend on a CUDA device,
    without a
    residual base (whose base policy reads the raw numpy observations); False = never; True = also on a CPU (the
    sampling then overlaps the update). The batch an update trains on was drawn one update earlier (so a run resumed
    from a checkpoint with prefetch on repeats the run's data, not its exact batches). Measured on an
    H100: 1.89x the updates/s with two 128x128 cameras at batch 256, no change for state (README "On a GPU")."""
    cuda_graphs: str = "auto"
    """Capture the torch agent's whole update (critic steps, actor, temperature, Adam steps, target updates, the
    random draws) as one CUDA graph per batch shape and replay it (learners.agents.graphs): one launch per update
    instead of thousands of kernel launches. 'auto' = on for the torch backend on a CUDA device without
    mixed_precision (on an H200: 7.8x eager for state, 1.1x for two uncached cameras, 3.9x on top of the feature
    cache); 'on' = the same, and a warning when it cannot be had; 'off' = eager. Without a CUDA device, or when the
    capture fails, the update runs eager (one warning). Not with
    mixed_precision=bf16."""
    device_replay: str = "auto"
    """JAX backend, state observations: the training loops (`robot-rl train`, the learner) keep the replay buffers'
    rows on the JAX device and draw each batch inside the jitted update (learners.agents.jax.device_replay; new
    transitions appended incrementally before each update). 'auto' = on for the JAX backend on a GPU without
    cameras, 'on' = also on a CPU (ConfigError with cameras), 'off' = batches sampled on the host. The torch backend
    ignores it (it samples on the host, with prefetch). Its draws come
    from the agent's JAX key instead of the buffers' numpy generators: other batches than a host-sampled run."""
    seed: int = 0
    """Seed of the network initialisation and of the agent's own random streams."""

    def validate(self) -> None:
        require(self.bc_q_filter_arm in BC_ARM_FILTERS, "bc_q_filter_arm", self.bc_q_filter_arm,
                f"must be one of {BC_ARM_FILTERS}")
        require(self.bc_q_filter_start >= 0, "bc_q_filter_start", self.bc_q_filter_start, "must be >= 0")
        require(0.0 <= self.bc_q_filter_floor <= 1.0, "bc_q_filter_floor", self.bc_q_filter_floor, "must be in [0, 1]")
        from learners.agents.obs import parse_select

        for entry in self.state_select:
            parse_select(entry)  # syntax only; leaf names are checked against the spec when a policy is built
        require(math.isfinite(self.state_scale) and self.state_scale > 0, "state_scale", self.state_scale,
                "must be a finite number > 0")
        require(len(self.hidden_dims) > 0 and all(h > 0 for h in self.hidden_dims), "hidden_dims",
                self.hidden_dims, "must be a non-empty tuple of positive ints")
        require(self.activation in ACTIVATIONS, "activation", self.activation, f"must be one of {ACTIVATIONS}")
        require(self.ensemble_size >= 1, "ensemble_size", self.ensemble_size, "must be >= 1")
        if self.ensemble_subsample is not None:
            require(1 <= self.ensemble_subsample <= self.ensemble_size, "ensemble_subsample",
                    self.ensemble_subsample, f"must be in [1, ensemble_size={self.ensemble_size}] or None")
        require(0 < self.std_min < self.std_max, "std_min/std_max", (self.std_min, self.std_max),
                "must satisfy 0 < std_min < std_max")
        require(self.batch_size >= 1, "batch_size", self.batch_size, "must be >= 1")
        require(self.critic_updates_per_actor_update >= 1, "critic_updates_per_actor_update",
                self.critic_updates_per_actor_update, "must be >= 1")
        require(0.0 < self.discount <= 1.0, "discount", self.discount, "must be in (0, 1]")
        require(self.n_step >= 1, "n_step", self.n_step, "must be >= 1")
        for name in ("actor_lr", "critic_lr", "temperature_lr", "temperature_init"):
            v = getattr(self, name)
            require(math.isfinite(v) and v > 0, name, v, "must be a finite number > 0")
        require(0.0 < self.tau <= 1.0, "tau", self.tau, "must be in (0, 1]")
        require(math.isfinite(self.target_entropy_per_dim), "target_entropy_per_dim",
                self.target_entropy_per_dim, "must be finite")
        if self.target_entropy is not None:
            require(math.isfinite(self.target_entropy), "target_entropy", self.target_entropy, "must be finite")
        require(math.isfinite(self.bc_weight) and self.bc_weight >= 0, "bc_weight", self.bc_weight,
                "must be a finite number >= 0")
        if self.grad_clip_norm is not None:
            require(self.grad_clip_norm > 0, "grad_clip_norm", self.grad_clip_norm, "must be > 0 or None")
        require(self.encoder in ENCODERS, "encoder", self.encoder, f"must be one of {ENCODERS}")
        require(self.encoder_features in ENCODER_FEATURES, "encoder_features", self.encoder_features,
                f"must be one of {ENCODER_FEATURES}")
        require(self.encoder_features == "spatial" or (self.encoder != "conv" and self.freeze_encoder),
                "encoder_features", self.encoder_features,
                "'targets' / 'both' read a frozen pretrained ResNet's target heads: needs encoder resnet10 / resnet18 "
                "with freeze_encoder (and encoder_weights from `robot-rl pretrain-encoder`)")
        require(self.encoder_pretrain_steps >= 0, "encoder_pretrain_steps", self.encoder_pretrain_steps, "must be >= 0")
        require(len(self.conv_channels) > 0 and all(c > 0 for c in self.conv_channels), "conv_channels",
                self.conv_channels, "must be a non-empty tuple of positive ints")
        require(self.num_spatial_features >= 1, "num_spatial_features", self.num_spatial_features, "must be >= 1")
        require(0.0 <= self.encoder_dropout < 1.0, "encoder_dropout", self.encoder_dropout, "must be in [0, 1)")
        require(self.image_latent_dim >= 1, "image_latent_dim", self.image_latent_dim, "must be >= 1")
        require(self.proprio_latent_dim >= 0, "proprio_latent_dim", self.proprio_latent_dim, "must be >= 0")
        require(self.augment_pad >= 0, "augment_pad", self.augment_pad, "must be >= 0")
        require(self.feature_cache in FEATURE_CACHE_MODES, "feature_cache", self.feature_cache,
                f"must be one of {FEATURE_CACHE_MODES}")
        require(isinstance(self.feature_cache_crops, int) and self.feature_cache_crops >= 1, "feature_cache_crops",
                self.feature_cache_crops, "must be an int >= 1")
        require(self.feature_cache_dtype in FEATURE_CACHE_DTYPES, "feature_cache_dtype", self.feature_cache_dtype,
                f"must be one of {FEATURE_CACHE_DTYPES}")
        require(self.feature_cache_device in FEATURE_CACHE_DEVICES, "feature_cache_device",
                self.feature_cache_device, f"must be one of {FEATURE_CACHE_DEVICES}")
        require(math.isfinite(self.feature_cache_budget_gb) and self.feature_cache_budget_gb > 0,
                "feature_cache_budget_gb", self.feature_cache_budget_gb, "must be a finite number > 0")
        require(math.isfinite(self.residual_scale) and 0 < self.residual_scale <= 2, "residual_scale",
                self.residual_scale, "must be in (0, 2]")
        require(self.residual_base is None or bool(self.residual_base.strip()), "residual_base", self.residual_base,
                "must be a run directory, checkpoint, policy file or py:MODULE:FACTORY (or none)")
        require(self.residual_base is None or not self.gripper_head, "residual_base", self.residual_base,
                "cannot be combined with gripper_head (the residual corrects continuous actions only)")
        require(len(self.gripper_hidden_dims) > 0 and all(h > 0 for h in self.gripper_hidden_dims),
                "gripper_hidden_dims", self.gripper_hidden_dims, "must be a non-empty tuple of positive ints")
        require(math.isfinite(self.gripper_flip_penalty), "gripper_flip_penalty", self.gripper_flip_penalty,
                "must be finite")
        require(0.0 <= self.gripper_epsilon <= 1.0, "gripper_epsilon", self.gripper_epsilon, "must be in [0, 1]")
        require(self.critic_loss in CRITIC_LOSSES, "critic_loss", self.critic_loss, f"must be one of {CRITIC_LOSSES}")
        require(self.hl_gauss_bins >= 2, "hl_gauss_bins", self.hl_gauss_bins, "must be >= 2")
        require(math.isfinite(self.hl_gauss_sigma_ratio) and self.hl_gauss_sigma_ratio > 0, "hl_gauss_sigma_ratio",
                self.hl_gauss_sigma_ratio, "must be a finite number > 0")
        if self.hl_gauss_range is not None:
            r = self.hl_gauss_range
            require(len(r) == 2 and all(math.isfinite(v) for v in r) and r[0] < r[1], "hl_gauss_range", r,
                    "must be two finite numbers v_min < v_max (or none: derived from the discount)")
        elif self.critic_loss == "hl_gauss":
            require(self.discount < 1.0, "hl_gauss_range", None,
                    f"cannot be derived with discount={self.discount} (needs discount < 1); set v_min,v_max")
            require(self.hl_gauss_bins > 6 * self.hl_gauss_sigma_ratio, "hl_gauss_range", None,
                    f"cannot be derived with hl_gauss_bins={self.hl_gauss_bins} <= 6 x hl_gauss_sigma_ratio="
                    f"{self.hl_gauss_sigma_ratio} (the 3-sigma margins take every bin); set v_min,v_max or more bins")
        require(self.backend in BACKENDS, "backend", self.backend, f"must be one of {BACKENDS}")
        require(not (self.prefetch and self.residual_base is not None), "prefetch", self.prefetch,
                "cannot be true with a residual_base (the base policy reads the raw numpy observations; leave "
                "prefetch unset)")
        require(self.cuda_graphs in CUDA_GRAPHS_MODES, "cuda_graphs", self.cuda_graphs,
                f"must be one of {CUDA_GRAPHS_MODES}")
        require(not (self.cuda_graphs == "on" and self.mixed_precision != "off"), "cuda_graphs", self.cuda_graphs,
                "cannot be 'on' with mixed_precision=bf16 (autocast's weight cache does not survive a capture); "
                "use cuda_graphs=auto or off")
        require(self.backbone_precision in BACKBONE_PRECISIONS, "backbone_precision", self.backbone_precision,
                f"must be one of {BACKBONE_PRECISIONS}")
        require(self.mixed_precision in MIXED_PRECISION, "mixed_precision", self.mixed_precision,
                f"must be one of {MIXED_PRECISION}")
        require(self.device_replay in DEVICE_REPLAY_MODES, "device_replay", self.device_replay,
                f"must be one of {DEVICE_REPLAY_MODES}")
        require(self.matmul_precision in MATMUL_PRECISIONS, "matmul_precision", self.matmul_precision,
                f"must be one of {MATMUL_PRECISIONS}")
        require(self.device == "auto" or self.device == "cpu" or self.device.startswith("cuda")
                or self.device == "mps", "device", self.device, "must be 'auto', 'cpu', 'cuda[:N]' or 'mps'")

    @property
    def hl_gauss_support(self) -> tuple[float, float]:
        """(v_min, v_max) of the hl_gauss value bins: hl_gauss_range, or the rule in its docstring when None."""
        if self.hl_gauss_range is not None:
            return float(self.hl_gauss_range[0]), float(self.hl_gauss_range[1])
        v_top = 1.0 / (1.0 - self.discount)
        sigma = self.hl_gauss_sigma_ratio * v_top / (self.hl_gauss_bins - 6 * self.hl_gauss_sigma_ratio)
        return -3.0 * sigma, v_top + 3.0 * sigma

    @property
    def bc_filters(self) -> tuple[str, bool, bool]:
        """(the arm dims' filter: 'off', 'joint' or 'own'; filter the gripper dim on its own; any filter): the BC
        term's Q filters as learners.agents.bc applies them (torch and JAX). Nothing without bc_q_filter; the
        gripper's own filter needs a continuous gripper dim (no gripper_head, whose gripper is outside the BC term);
        with the head the arm dims are the whole BC action, so 'own' is 'joint' and 'off' falls back to it."""
        if not self.bc_q_filter:
            return "off", False, False
        if self.gripper_head:
            return "joint", False, True
        arm = self.bc_q_filter_arm if (self.bc_q_filter_arm != "off" or self.bc_q_filter_gripper) else "joint"
        return arm, self.bc_q_filter_gripper, True

    @property
    def samples_per_update(self) -> int:
        """Rows one `update()` call consumes: batch_size x critic_updates_per_actor_update."""
        return self.batch_size * self.critic_updates_per_actor_update


def agent_field_names() -> tuple[str, ...]:
    """The AgentConfig field names, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(AgentConfig))


def check_agent_fields(names: Iterable[str], where: str) -> None:
    """Raise ConfigError (one line: `where`, the unknown name, a close match, the valid names) unless every name
    in `names` is an AgentConfig field."""
    valid = agent_field_names()
    for name in names:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{where}: unknown AgentConfig field '{name}'{hint}; valid fields: "
                              f"{', '.join(sorted(valid))}")


def drq_config(**overrides: Any) -> AgentConfig:
    """SERL's image-based DrQ/RLPD defaults (the AgentConfig defaults)."""
    return AgentConfig(**overrides)


def rlpd_state_config(**overrides: Any) -> AgentConfig:
    """State-based RLPD: ensemble 10 / subset 2, LayerNorm, discount 0.99 (RLPD paper), 8 critic updates per
    actor update (SERL's state SAC; the RLPD paper uses UTD 20)."""
    base: dict[str, Any] = dict(discount=0.99, critic_updates_per_actor_update=8)
    base.update(overrides)
    return AgentConfig(**base)


def hil_serl_config(**overrides: Any) -> AgentConfig:
    """HIL-SERL: 2 critics without a subset, 2 critic updates per actor update, discount 0.97, gripper DQN head."""
    base: dict[str, Any] = dict(ensemble_size=2, ensemble_subsample=None, critic_updates_per_actor_update=2,
                                discount=0.97, gripper_head=True)
    base.update(overrides)
    return AgentConfig(**base)


def sac_config(**overrides: Any) -> AgentConfig:
    """Classic SAC (Haarnoja et al. 2018): twin critics (min of both), UTD 1, discount 0.99, temperature init 1,
    target entropy -dim(A), backup entropy on, no LayerNorm, ReLU."""
    base: dict[str, Any] = dict(ensemble_size=2, ensemble_subsample=None, critic_updates_per_actor_update=1,
                                discount=0.99, temperature_init=1.0, target_entropy_per_dim=-1.0, backup_entropy=True,
                                layer_norm=False, activation="relu")
    base.update(overrides)
    return AgentConfig(**base)
