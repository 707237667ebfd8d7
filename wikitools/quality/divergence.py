"""KL divergence of a candidate capture from a reference capture, position by position, and the
summary a KLD table shows (mean over positions, spread over runs and over positions).

KL(ref || cand) = sum over tokens v of p(v) (ln p(v) - ln q(v)), p the reference's probabilities
and q the candidate's. Captures hold rounded log-probabilities, so each distribution is
renormalised before summing (unnormalised sums can come out slightly negative).

With the whole vocabulary (top_k -1) the sum is exact. With the top k only, every token outside
the reference's k is folded into one "tail" bucket on both sides: tail mass 1 - sum of the k
probabilities. Folding categories together can only lower a KL divergence (the log-sum
inequality), so a top-k figure is a lower bound of the full-vocabulary one when each of the
reference's k tokens is also in the candidate's k. A reference token missing from the
candidate's k gets the candidate's leftover mass shared among the missing tokens, at most the
candidate's k-th probability: an estimate, and the number of such tokens is reported."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from wikitools.core.errors import InputError
from wikitools.quality.capture import Capture

TINY = 1e-12  # the least probability a bucket is given, so that ln q stays finite


@dataclass(frozen=True, slots=True)
class Divergence:
    """One candidate capture against the reference."""

    per_position: tuple[float, ...]
    top1_agree: int  # positions whose most likely token is the same
    estimated: int  # reference tokens not in the candidate's top k (their q was estimated)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.per_position)


@dataclass(frozen=True, slots=True)
class Summary:
    """What a KLD table row shows for one server configuration."""

    mean: float  # mean KLD over positions, averaged over the runs
    run_sd: float | None  # sample SD of the runs' means (None with one run)
    position_sd: float  # SD over positions of the per-position KLD averaged over runs
    maximum: float  # largest per-position KLD (averaged over runs)
    positions: int
    runs: int
    top_k: int
    top1_agreement: float  # share of positions whose most likely token agrees (all runs)
    estimated: int  # reference tokens missing from a candidate's top k, over all runs

    def to_dict(self) -> dict[str, float | int | None]:
        return {"kld_mean": self.mean, "kld_run_sd": self.run_sd,
                "kld_position_sd": self.position_sd, "kld_max": self.maximum,
                "kld_positions": self.positions, "kld_runs": self.runs, "kld_top_k": self.top_k,
                "kld_top1_agreement": self.top1_agreement, "kld_estimated": self.estimated}


def _normalised(pairs: Sequence[tuple[int, float]], full: bool) -> tuple[dict[int, float], float]:
    """Probabilities of the listed tokens and the tail mass, renormalised: with the whole
    vocabulary to a sum of 1; with the top k so that the listed mass is at most 1."""
    probs = {i: math.exp(lp) for i, lp in pairs}
    total = sum(probs.values())
    if full or total > 1.0:
        return {i: p / total for i, p in probs.items()}, 0.0
    return probs, 1.0 - total


def position_kld(ref: Sequence[tuple[int, float]], cand: Sequence[tuple[int, float]],
                 full: bool) -> tuple[float, int]:
    """(KL divergence at one position, reference tokens whose q was estimated)."""
    p, p_tail = _normalised(ref, full)
    q_known, q_rest = _normalised(cand, full)
    missing = [i for i in p if i not in q_known]
    q = dict(q_known)
    if missing:
        kth = min(q_known.values()) if q_known else q_rest
        share = min(kth, q_rest / len(missing)) if q_rest > 0 else TINY
        for i in missing:
            q[i] = max(share, TINY)
    q_tail = max(1.0 - sum(q[i] for i in p), TINY) if not full else 0.0
    kl = sum(pi * (math.log(pi) - math.log(max(q[i], TINY))) for i, pi in p.items() if pi > 0)
    if p_tail > 0:
        kl += p_tail * (math.log(p_tail) - math.log(q_tail if q_tail > 0 else TINY))
    return max(kl, 0.0), len(missing)


def divergence(ref: Capture, cand: Capture) -> Divergence:
    if ref.input_sha256 != cand.input_sha256:
        raise InputError(f"the candidate scored input {cand.input_sha256}, the reference "
                         f"{ref.input_sha256}: not the same tokens")
    if ref.top_k != cand.top_k:
        raise InputError(f"the candidate has top-k {cand.top_k}, the reference {ref.top_k}")
    if len(ref.positions) != len(cand.positions):
        raise InputError(f"the candidate has {len(cand.positions)} positions, the reference "
                         f"{len(ref.positions)}")
    full = ref.top_k == -1
    values, agree, estimated = [], 0, 0
    for r, c in zip(ref.positions, cand.positions, strict=True):
        kl, missing = position_kld(r, c, full)
        values.append(kl)
        estimated += missing
        agree += bool(r and c and r[0][0] == c[0][0])
    return Divergence(tuple(values), agree, estimated)


def summarise(runs: Sequence[Divergence], top_k: int) -> Summary:
    if not runs:
        raise ValueError("no runs to summarise")
    n = len(runs[0].per_position)
    averaged = [statistics.fmean(r.per_position[i] for r in runs) for i in range(n)]
    means = [r.mean for r in runs]
    return Summary(
        mean=statistics.fmean(means),
        run_sd=statistics.stdev(means) if len(means) > 1 else None,
        position_sd=statistics.pstdev(averaged),
        maximum=max(averaged),
        positions=n,
        runs=len(runs),
        top_k=top_k,
        top1_agreement=sum(r.top1_agree for r in runs) / (n * len(runs)),
        estimated=sum(r.estimated for r in runs),
    )
