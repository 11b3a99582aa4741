"""The JAX backend's update: learners.agents.sac's SAC / RLPD / DrQ update as pure functions of (state, batch), jitted
by learners.agents.jax.agent.JaxSACAgent as ONE function per agent, in the same phases as the torch agent.

`update_core(state, frozen, batch, draws, st) -> (state, metrics)`: DrQ shifts and frozen-backbone features
(`_prepare_images`), the strided minibatches (`_minibatches`), k x `_critic_phase` (critic + encoder, the gripper
head's `_gripper_phase`, soft target updates) as one `lax.scan`, then `_actor_phase` on the last minibatch and
`_temperature_phase`. `state` is the agent's dict of parameter groups (actor, encoder, gripper, critic and their
targets, log_alpha, the Adam states, num_updates, the random key); `frozen` the frozen backbone weights; `batch`
the numpy batch of JaxSACAgent._batch; `draws` the update's random numbers (`draws`: from the agent's key, or
given, for comparing with torch); `st` the static shape (learners.agents.jax.nets.Static), never traced.

jax is imported inside the functions (the `jax` extra is optional).

Usage::

    key, draws = draws_from_key(state["key"], st, cfg.samples_per_update)
    state, metrics = update_core(dict(state, key=key), frozen, batch, draws, st)     # inside jax.jit
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from learners.agents.jax.nets import (
    Static,
    actor,
    adam,
    backbone,
    clip,
    encode,
    ensemble,
    gripper_q,
    lerp,
    random_shift,
    tanh_gaussian,
)

_MINIBATCH_COLUMNS = ("actions", "returns", "bootstrap", "gp_returns", "target_floor")


def update_core(s: dict[str, Any], frozen: Mapping[str, Any], batch: Mapping[str, Any], draws: Mapping[str, Any],
                st: Static) -> tuple[dict[str, Any], dict[str, Any]]:
    """One `update()`: st.k critic (+ gripper, + target) updates on the strided minibatches, then one actor and
    temperature update on the last; pure function of (state, frozen weights, batch, random draws)."""
    import jax
    import jax.numpy as jnp

    images, next_images, use_bf = _prepare_images(frozen, batch, draws, st)
    xs = _minibatches(batch, images, next_images, draws, st)
    critic_phase = functools.partial(_critic_phase, frozen=frozen, use_bf=use_bf, st=st)
    carry = dict(s, last_feats=jnp.zeros((st.minibatch, st.feat_dim), jnp.float32))
    carry, infos = jax.lax.scan(critic_phase, carry, xs)
    feats = carry.pop("last_feats")
    out = {key: v.mean() for key, v in infos.items()}
    # actor + temperature on the last minibatch (rows k-1::k), features detached
    bc_actions = xs["actions"][st.k - 1][:, : st.arm_dim]
    bc_mask = _strided(batch["intervention"], st)[st.k - 1]
    carry, actor_info, logp = _actor_phase(carry, feats, bc_actions, bc_mask, draws["actor_noise"], st)
    carry, temperature_info = _temperature_phase(carry, logp, st)
    out.update(actor_info)
    out.update(temperature_info)
    carry["num_updates"] = carry["num_updates"] + 1
    return carry, out


def _strided(x: Any, st: Static) -> Any:
    """(n, ...) -> (k, mb, ...): minibatch i = rows i::k."""
    import jax.numpy as jnp

    return jnp.swapaxes(x.reshape(st.minibatch, st.k, *x.shape[1:]), 0, 1)


def _prepare_images(frozen: Mapping[str, Any], batch: Mapping[str, Any], draws: Mapping[str, Any], st: Static,
                    ) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(obs images, next_obs images, whether they are frozen-backbone features): DrQ's random shifts (obs and
    next_obs independently, per camera), then with frozen backbones their features, once for the whole batch."""
    import jax

    images, next_images = dict(batch["images"]), dict(batch["next_images"])
    if st.cameras and st.augment_pad > 0:
        for j, cam in enumerate(st.cameras):
            images[cam.name] = random_shift(images[cam.name], draws["shifts"][j])
            next_images[cam.name] = random_shift(next_images[cam.name], draws["shifts"][len(st.cameras) + j])
    if not st.all_frozen:
        return images, next_images, False

    def features(imgs: Mapping[str, Any]) -> dict[str, Any]:
        return {c.name: jax.lax.stop_gradient(backbone(frozen, f"encoder/cameras/{c.key}/backbone", imgs[c.name], c))
                for c in st.cameras}

    return features(images), features(next_images), True


def _minibatches(batch: Mapping[str, Any], images: Mapping[str, Any], next_images: Mapping[str, Any],
                 draws: Mapping[str, Any], st: Static) -> dict[str, Any]:
    """What `lax.scan` walks over: every column as (k, mb, ...), with each critic update's random draws."""
    xs: dict[str, Any] = {key: _strided(batch[key], st) for key in _MINIBATCH_COLUMNS}
    xs["state"] = None if batch["state"] is None else _strided(batch["state"], st)
    xs["next_state"] = None if batch["next_state"] is None else _strided(batch["next_state"], st)
    xs["images"] = {n: _strided(v, st) for n, v in images.items()}
    xs["next_images"] = {n: _strided(v, st) for n, v in next_images.items()}
    xs["noise"], xs["members"], xs["dropout"] = draws["noise"], draws["members"], draws["dropout"]
    return xs


def _critic_phase(c: dict[str, Any], x: dict[str, Any], *, frozen: Mapping[str, Any], use_bf: bool, st: Static,
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """One critic (+ encoder) update on minibatch `x`, the gripper head's update, then the soft target updates;
    the scan body: (state, minibatch) -> (state with `last_feats`, the detached features, metrics)."""
    import jax
    import jax.numpy as jnp

    def enc_call(p: Mapping[str, Any], prefix: str, imgs: Mapping[str, Any], state: Any, key: Any) -> Any:
        return encode(p, prefix, frozen, imgs, imgs if use_bf else None, state, st, key)

    alpha = jnp.exp(c["log_alpha"])
    arm = x["actions"][:, : st.arm_dim]
    k_feat, k_next = (x["dropout"][0], x["dropout"][1]) if x["dropout"] is not None else (None, None)
    next_feats = jax.lax.stop_gradient(enc_call(c["encoder"], "encoder/", x["next_images"], x["next_state"], k_next))
    target_feats = enc_call(c["target_encoder"], "", x["next_images"], x["next_state"], None)
    next_a, next_logp = tanh_gaussian(*actor(c["actor"], next_feats, st), x["noise"])
    tq = ensemble(c["target_critic"], jnp.concatenate([target_feats, next_a], -1), st, x["members"]).min(0)
    if st.backup_entropy:
        tq = tq - alpha * next_logp
    td = x["returns"] + x["bootstrap"] * tq
    target = jax.lax.stop_gradient(jnp.maximum(td, x["target_floor"]))

    def loss_fn(critic: Any, encoder: Any) -> tuple[Any, tuple[Any, Any]]:
        feats = enc_call(encoder, "encoder/", x["images"], x["state"], k_feat)
        q = ensemble(critic, jnp.concatenate([feats, arm], -1), st)
        return jnp.mean(jnp.square(q - target[None])), (q, feats)

    (loss, (q, feats)), grads = jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True)(c["critic"], c["encoder"])
    grads, norm = clip(grads, st.grad_clip_norm)
    (critic, encoder), c_opt = adam((c["critic"], c["encoder"]), grads, c["opt_critic"], st.critic_lr)
    c = dict(c, critic=critic, encoder=encoder, opt_critic=c_opt)
    info = {"critic_loss": loss, "q_mean": q.mean(),
            "q_ensemble_std": jnp.std(q, axis=0, ddof=1).mean() if st.ensemble > 1 else jnp.zeros(()),
            "target_q_mean": target.mean()}
    if st.mc_lower_bound:
        info["mc_bound_share"] = jnp.mean((x["target_floor"] > td).astype(jnp.float32))
    if st.grad_clip_norm is not None:
        info["critic_grad_norm"] = norm
    feats = jax.lax.stop_gradient(feats)
    if st.gripper:
        c, gripper_info = _gripper_phase(c, x, feats, next_feats, target_feats, st)
        info.update(gripper_info)
    c = dict(c, target_critic=lerp(c["target_critic"], c["critic"], st.tau),
             target_encoder=lerp(c["target_encoder"], _strip(c["encoder"], "encoder/"), st.tau))
    return dict(c, last_feats=feats), info


def _gripper_phase(c: dict[str, Any], x: Mapping[str, Any], feats: Any, next_feats: Any, target_feats: Any,
                   st: Static) -> tuple[dict[str, Any], dict[str, Any]]:
    """One double-DQN update of the gripper head (online argmax on s', target value, reward + grasp penalty) on
    the detached features, and its soft target update."""
    import jax
    import jax.numpy as jnp

    idx = (jnp.round(jnp.clip(x["actions"][:, -1], -1.0, 1.0)) + 1.0).astype(jnp.int32)
    best = jnp.argmax(gripper_q(c["gripper"], next_feats, st), -1)
    next_q = jnp.take_along_axis(gripper_q(c["target_gripper"], target_feats, st, prefix=""), best[:, None], -1)[:, 0]
    g_target = x["returns"] + x["gp_returns"] + x["bootstrap"] * next_q

    def g_loss_fn(gp: Any) -> tuple[Any, Any]:
        gq = jnp.take_along_axis(gripper_q(gp, feats, st), idx[:, None], -1)[:, 0]
        return jnp.mean(jnp.square(gq - g_target)), gq

    (g_loss, gq), g_grads = jax.value_and_grad(g_loss_fn, has_aux=True)(c["gripper"])
    g_grads, _ = clip(g_grads, st.grad_clip_norm)
    gripper, g_opt = adam(c["gripper"], g_grads, c["opt_gripper"], st.actor_lr)
    c = dict(c, gripper=gripper, opt_gripper=g_opt,
             target_gripper=lerp(c["target_gripper"], _strip(gripper, "gripper/"), st.tau))
    return c, {"gripper_loss": g_loss, "gripper_q_mean": gq.mean()}


def _actor_phase(carry: dict[str, Any], feats: Any, bc_actions: Any, bc_mask: Any, noise: Any, st: Static,
                 ) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """One actor update on the last minibatch's detached features (mean Q over the ensemble, the BC term on human
    rows, optionally Q-filtered); returns the state, the metrics and log pi(a|s) (the temperature's input)."""
    import jax
    import jax.numpy as jnp

    alpha = jnp.exp(carry["log_alpha"])
    n_human = jnp.maximum(bc_mask.sum(), 1.0)

    def actor_loss_fn(actor_params: Any) -> tuple[Any, tuple[Any, Any, Any]]:
        mean, log_std = actor(actor_params, feats, st)
        a, logp = tanh_gaussian(mean, log_std, noise)
        q = ensemble(carry["critic"], jnp.concatenate([feats, a], -1), st).mean(0)
        mode = jnp.tanh(mean)
        sq = jnp.square(mode - bc_actions)  # (B, A)
        mask = keep_gripper = shown = bc_mask
        if st.bc_arm_filter != "off" or st.bc_q_filter_gripper:  # filters as in learners.agents.bc (Nair 2018)
            own = jax.lax.stop_gradient(mode)
            q_mode = ensemble(carry["critic"], jnp.concatenate([feats, own], -1), st).mean(0)

            def kept(act: Any) -> Any:
                q_act = ensemble(carry["critic"], jnp.concatenate([feats, jax.lax.stop_gradient(act)], -1), st)
                return bc_mask * jax.lax.stop_gradient(q_act.mean(0) > q_mode).astype(bc_mask.dtype)

            if st.bc_arm_filter != "off":  # a human row's arm counts only while the critic prefers it to the mode
                arm = bc_actions if st.bc_arm_filter == "joint" else jnp.concatenate(
                    [bc_actions[:, :-1], own[:, -1:]], -1)
                mask = keep_gripper = kept(arm)
            if st.bc_q_filter_gripper:  # the gripper (last) dim by its own filter
                keep_gripper = kept(jnp.concatenate([own[:, :-1], bc_actions[:, -1:]], -1))
            shown = mask if st.bc_arm_filter != "off" else keep_gripper
            # a dropped row's weight: the floor, 1 in the warm-up
            warm = (carry["num_updates"] < st.bc_q_filter_start).astype(bc_mask.dtype)
            least = bc_mask * jnp.maximum(warm, st.bc_q_filter_floor)
            mask, keep_gripper = jnp.maximum(mask, least), jnp.maximum(keep_gripper, least)
        per_row = sq[:, :-1].sum(-1) * mask + sq[:, -1] * keep_gripper
        bc = per_row.sum() / n_human  # over all human rows: the term fades as the filter drops rows
        return jnp.mean(alpha * logp - q) + st.bc_weight * bc, (logp, bc, shown.sum() / n_human)

    (actor_loss, (logp, bc, bc_share)), a_grads = jax.value_and_grad(actor_loss_fn, has_aux=True)(carry["actor"])
    a_grads, _ = clip(a_grads, st.grad_clip_norm)
    new_actor, a_opt = adam(carry["actor"], a_grads, carry["opt_actor"], st.actor_lr)
    info: dict[str, Any] = {}
    if st.bc_weight > 0:
        info["bc_loss"] = bc
        if st.bc_arm_filter != "off" or st.bc_q_filter_gripper:
            info["bc_kept"] = bc_share  # share of the human rows the Q filter kept
    info["actor_loss"] = actor_loss
    return dict(carry, actor=new_actor, opt_actor=a_opt), info, logp


def _temperature_phase(carry: dict[str, Any], logp: Any, st: Static) -> tuple[dict[str, Any], dict[str, Any]]:
    """One temperature update toward the target entropy (with st.learn_temperature); the state and metrics."""
    import jax
    import jax.numpy as jnp

    entropy = -jax.lax.stop_gradient(logp).mean()
    temp_loss = jnp.exp(carry["log_alpha"]) * (entropy - st.target_entropy)
    if st.learn_temperature:
        t_grad, _ = clip(temp_loss, st.grad_clip_norm)  # d/d log_alpha of exp(log_alpha) * c is the loss itself
        log_alpha, t_opt = adam(carry["log_alpha"], t_grad, carry["opt_temperature"], st.temperature_lr)
        carry = dict(carry, log_alpha=log_alpha, opt_temperature=t_opt)
    return carry, {"entropy": entropy, "temperature": jnp.exp(carry["log_alpha"]), "temperature_loss": temp_loss}


def _strip(params: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """{prefix + path: v} -> {path: v} (online encoder / gripper paths -> their target networks' paths)."""
    return {key[len(prefix):]: v for key, v in params.items()}


def draws_from_key(key: Any, st: Static, batch_rows: int) -> tuple[Any, dict[str, Any]]:
    """The random numbers of one update from `key` (returns the next key): critic noise (k, mb, A), target
    subsets (k, M), actor noise (mb, A), image shifts (2 x cameras, n, 2), dropout keys (k, 2)."""
    import jax

    keys = jax.random.split(key, 6)
    members = jax.vmap(lambda kk: jax.random.permutation(kk, st.ensemble)[: st.members])(
        jax.random.split(keys[2], st.k))
    draws: dict[str, Any] = {
        "noise": jax.random.normal(keys[1], (st.k, st.minibatch, st.arm_dim)),
        "members": members,
        "actor_noise": jax.random.normal(keys[3], (st.minibatch, st.arm_dim)),
        "shifts": None, "dropout": None}
    if st.cameras and st.augment_pad > 0:
        draws["shifts"] = jax.random.randint(keys[4], (2 * len(st.cameras), batch_rows, 2), -st.augment_pad,
                                             st.augment_pad + 1)
    if st.cameras and st.dropout > 0:
        draws["dropout"] = jax.random.split(keys[5], (st.k, 2))
    return keys[0], draws


__all__ = ["draws_from_key", "update_core"]
