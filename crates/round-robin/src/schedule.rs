//! RDMC's binomial pipeline (`BINOMIAL_SEND`): the block schedule of a large message over a
//! hypercube rooted at the sender (members rotated so the sender is rank 0), for any group
//! size `n >= 2`.
//!
//! **The hypercube** (`n = 2^l`). The message is cut into `k` blocks and sent in `k + l - 1`
//! steps. At step `s` every vertex exchanges with its neighbour across dimension `s mod l`
//! (`v ^ 2^(s mod l)`): the root sends a new block at every step, and every other vertex
//! forwards a block it already holds, so after the first `l` steps every link carries a block
//! at every step (each vertex sends and receives one block per step) — the root's outgoing
//! traffic is `k + l - 1` blocks instead of a tree root's `l·k`. Which block crosses a link
//! depends only on the receiver: rotate its bits right by the step's dimension; if the lowest
//! bit is 0 it gets block `s - l` (once `s >= l`); otherwise, with `i` the next set bit above
//! bit 0 it gets block `s + i - l` (once that is not negative), and with no other bit set
//! block `s` — each capped at `k - 1`.
//!
//! **Twins** (`n = 2^l + m`, `0 < m < 2^l`), after RDMC: ranks `0..2^l` are the hypercube's
//! vertices and the `m` extra ranks `2^l + v - 1` are the *twins* of vertices `v = 1..=m` (the
//! root has none). The hypercube schedule runs unchanged between vertices. A vertex with a twin
//! hands every block it receives at step `s` to its twin at step `s + 1`, and the pair split
//! the vertex's outgoing hypercube work: a hypercube send of block `b` at step `s` is made by
//! the twin when the twin already holds `b` (it got it at step `s - 1` or earlier), otherwise
//! by the vertex. So every member receives every block exactly once and at most one block per
//! step, forwards only blocks it received at an earlier step, and the whole message takes
//! `k + l` steps (`k + ceil(log2 n) - 1`). RDMC's own `binomial_schedule` instead alternates
//! which of the pair does the vertex's hypercube exchange (the other receives the previous block
//! from its partner); this variant keeps the same depth, the same one-receive-per-step bound and
//! the same root traffic with a simpler rule — the unit tests check every property above for
//! every `n <= 33` and `k <= 40`.
//!
//! Squall runs the schedule without steps: each member posts each of its transfers (in step
//! order where the blocks are there) as soon as the block's arrival marker has landed; the
//! dependency is always on an earlier step, so the pipeline never stalls on itself.

/// The block vertex `v` sends at step `s`, and to which vertex, in a hypercube of `2^l`
/// vertices carrying `k` blocks (`l >= 1`, `k >= 1`).
fn transfer(v: usize, s: usize, l: u32, k: usize) -> Option<(usize, usize)> {
    let l = l as usize;
    if s >= k + l - 1 {
        return None;
    }
    let d = s % l;
    let to = v ^ (1 << d);
    if to == 0 {
        return None;
    }
    let mask = (1usize << l) - 1;
    let rotated = ((to | (to << l)) >> d) & mask;
    let block = if rotated & 1 == 0 {
        s.checked_sub(l)?
    } else {
        let i = (1..l).find(|&i| rotated & (1 << i) != 0).unwrap_or(l);
        (s + i).checked_sub(l)?.min(k - 1)
    };
    Some((to, block))
}

/// `floor(log2 n)` for `n >= 1`.
fn floor_log2(n: usize) -> u32 {
    usize::BITS - 1 - n.leading_zeros()
}

/// Member `rank`'s transfers of a `k`-block message in a group of `n` (ranks rotated so the
/// sender is 0), in step order, as (step, target rank, block).
fn steps(rank: usize, n: usize, k: usize) -> Vec<(usize, usize, usize)> {
    if n < 2 || k == 0 || rank >= n {
        return Vec::new();
    }
    let l = floor_log2(n);
    let p = 1usize << l;
    let hyper = k + l as usize - 1; // steps of the hypercube schedule
    let vertex = if rank < p { rank } else { rank - p + 1 };
    let twin = (vertex >= 1 && vertex <= n - p).then(|| p + vertex - 1);
    let Some(twin) = twin else {
        // A vertex without a twin (every vertex when n is a power of two).
        return (0..hyper)
            .filter_map(|s| transfer(vertex, s, l, k).map(|(to, b)| (s, to, b)))
            .collect();
    };
    // The step at which the vertex receives each block (exactly one, see the tests).
    let mut arrives = vec![usize::MAX; k];
    let mut arrivals = vec![None; hyper];
    for (s, at) in arrivals.iter_mut().enumerate() {
        let from = vertex ^ (1 << (s % l as usize));
        if let Some((_, b)) = transfer(from, s, l, k) {
            arrives[b] = s;
            *at = Some(b);
        }
    }
    // The twin holds block b from step arrives[b] + 2 on (it gets it at arrives[b] + 1).
    let twin_holds = |b: usize, s: usize| arrives[b].saturating_add(2) <= s;
    let mut out = Vec::new();
    for s in 0..=hyper {
        if let Some((to, b)) = transfer(vertex, s, l, k)
            && twin_holds(b, s) == (rank == twin)
        {
            out.push((s, to, b));
        }
        if rank == vertex
            && let Some(b) = s.checked_sub(1).and_then(|r| arrivals[r])
        {
            out.push((s, twin, b));
        }
    }
    out
}

/// Member `rank`'s transfers of a `k`-block message in a group of `n >= 2` members, in step
/// order, as (target rank, block). Ranks are rotated so that the sender is 0.
pub(crate) fn binomial_pipeline(rank: usize, n: usize, k: usize) -> Vec<(usize, usize)> {
    steps(rank, n, k)
        .into_iter()
        .map(|(_, to, b)| (to, b))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ceil(log2 n)` for `n >= 2`.
    fn ceil_log2(n: usize) -> usize {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    }

    /// Runs the schedule step by step for every group size from 2 to 33 and every message of
    /// 1 to 40 blocks: every member but the root receives every block exactly once (the root
    /// none), at most one block per step; a member only sends a block it received at an
    /// earlier step (the root holds them all); the root sends `k + floor(log2 n) - 1` blocks,
    /// one per step while blocks remain; and the last transfer happens before step
    /// `k + ceil(log2 n) - 1`.
    #[test]
    fn every_member_gets_every_block_once_and_only_forwards_what_it_holds() {
        for n in 2..=33usize {
            for k in 1..=40usize {
                let lists: Vec<_> = (0..n).map(|r| steps(r, n, k)).collect();
                let depth = k + ceil_log2(n) - 1;
                let mut by_step = vec![Vec::new(); depth];
                for (from, list) in lists.iter().enumerate() {
                    let mut last = 0;
                    for &(s, to, b) in list {
                        assert!(s >= last, "n={n} k={k}: {from}'s list out of step order");
                        last = s;
                        assert!(
                            s < depth,
                            "n={n} k={k}: {from} sends at step {s} >= {depth}"
                        );
                        assert!(to < n && to != from && to != 0 && b < k, "n={n} k={k}");
                        by_step[s].push((from, to, b));
                    }
                }
                let mut held_since: Vec<Vec<Option<usize>>> = vec![vec![None; k]; n];
                held_since[0] = vec![Some(0); k];
                let mut received = vec![vec![0u32; k]; n];
                for (s, transfers) in by_step.iter().enumerate() {
                    let mut into = vec![0u32; n];
                    for &(from, to, b) in transfers {
                        assert!(
                            held_since[from][b].is_some_and(|t| t <= s),
                            "n={n} k={k} s={s}: {from} sends block {b} it lacks"
                        );
                        into[to] += 1;
                    }
                    assert!(into.iter().all(|&c| c <= 1), "n={n} k={k} s={s}: {into:?}");
                    for &(_, to, b) in transfers {
                        received[to][b] += 1;
                        // Usable from the next step on.
                        held_since[to][b].get_or_insert(s + 1);
                    }
                }
                for (m, r) in received.iter().enumerate().skip(1) {
                    assert!(r.iter().all(|&c| c == 1), "n={n} k={k} member {m}: {r:?}");
                }
                assert!(received[0].iter().all(|&c| c == 0));
                let l = floor_log2(n) as usize;
                assert_eq!(lists[0].len(), k + l - 1, "n={n} k={k}: root sends");
                for s in 0..k {
                    assert!(
                        lists[0].iter().any(|t| t.0 == s),
                        "n={n} k={k}: root idle at {s}"
                    );
                }
            }
        }
    }

    /// Twins take work off their vertex where the hypercube leaves room: a vertex with a twin
    /// sends at most two blocks per step (its hypercube send and the hand-over), every other
    /// member at most one; and from `floor(log2 n) = 3` on the twins make some of their
    /// vertices' hypercube sends (with `log2 n = 2` a vertex forwards each block at the very
    /// next step, before its twin could hold it, so there the twin only receives).
    #[test]
    fn twins_share_their_vertex_sends() {
        for n in 5..=33usize {
            let p = 1usize << floor_log2(n);
            for k in [1usize, 8, 40] {
                for r in 0..n {
                    let mut per_step = vec![0u32; k + floor_log2(n) as usize];
                    for (s, _, _) in steps(r, n, k) {
                        per_step[s] += 1;
                    }
                    let paired = r >= 1 && r <= n - p;
                    let max = if paired { 2 } else { 1 };
                    assert!(per_step.iter().all(|&c| c <= max), "n={n} k={k} rank {r}");
                }
                if n >= 9 && !n.is_power_of_two() && k == 40 {
                    let twins: usize = (p..n).map(|t| steps(t, n, k).len()).sum();
                    assert!(twins > 0, "n={n}: the twins never send");
                }
            }
        }
    }

    /// The per-member lists are the schedule in step order, and the sizes add up.
    #[test]
    fn lists_are_in_step_order() {
        let k = 5usize;
        for n in [8usize, 6] {
            let total: usize = (0..n).map(|v| binomial_pipeline(v, n, k).len()).sum();
            assert_eq!(
                total,
                (n - 1) * k,
                "n={n}: each receiver gets each block once"
            );
        }
        assert_eq!(binomial_pipeline(0, 8, k).len(), k + 2);
        assert_eq!(binomial_pipeline(0, 8, k)[..3], [(1, 0), (2, 1), (4, 2)]);
        // n = 6: vertices 0..4, twins 4 (of vertex 1) and 5 (of vertex 2); vertex 1 gets block
        // 0 at step 0 and hands it to its twin at step 1.
        assert!(steps(1, 6, k).contains(&(1, 4, 0)));
        assert!(binomial_pipeline(3, 1, k).is_empty());
        assert!(binomial_pipeline(3, 8, 0).is_empty());
        assert_eq!(floor_log2(8), 3);
        assert_eq!(floor_log2(9), 3);
        assert_eq!(floor_log2(1), 0);
    }
}
