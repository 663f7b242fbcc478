//! RDMC's binomial pipeline (`BINOMIAL_SEND`): the block schedule of a large message over a
//! hypercube of `2^l` vertices rooted at the sender (vertex 0, members rotated so the sender
//! is first).
//!
//! The message is cut into `k` blocks and sent in `k + l - 1` steps. At step `s` every vertex
//! exchanges with its neighbour across dimension `s mod l` (`v ^ 2^(s mod l)`): the root sends
//! a new block at every step, and every other vertex forwards a block it already holds, so
//! after the first `l` steps every link carries a block at every step (each vertex sends and
//! receives one block per step) — the root's outgoing traffic is `k + l - 1` blocks instead of
//! a tree root's `l·k`. Which block crosses a link depends only on the receiver: rotate its
//! bits right by the step's dimension; if the lowest bit is 0 it gets block `s - l` (once
//! `s >= l`); otherwise, with `i` the next set bit above bit 0 it gets block `s + i - l` (once
//! that is not negative), and with no other bit set block `s` — each capped at `k - 1`. Every
//! non-root vertex then receives every block exactly once, and sends a block only at a step
//! after the one at which it received it (the unit tests check both for every `l <= 4`).
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

/// Vertex `v`'s transfers of a `k`-block message in step order, as (target vertex, block).
/// `v` and the targets are ranks rotated so that the sender is 0.
pub(crate) fn binomial_pipeline(v: usize, l: u32, k: usize) -> Vec<(usize, usize)> {
    if l == 0 || k == 0 {
        return Vec::new();
    }
    (0..k + l as usize - 1)
        .filter_map(|s| transfer(v, s, l, k))
        .collect()
}

/// `log2(n)` when `n` is a power of two of at least 2.
pub(crate) fn hypercube_dim(n: usize) -> Option<u32> {
    (n >= 2 && n.is_power_of_two()).then(|| n.trailing_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the schedule step by step: every non-root vertex receives every block exactly
    /// once, at most one block per step; a vertex only sends a block it received at an
    /// earlier step; the root sends at every step once blocks remain.
    #[test]
    fn every_vertex_gets_every_block_once_and_only_forwards_what_it_holds() {
        for l in 1..=4u32 {
            let n = 1usize << l;
            for k in 1..=40usize {
                let steps = k + l as usize - 1;
                let mut held_since: Vec<Vec<Option<usize>>> = vec![vec![None; k]; n];
                held_since[0] = vec![Some(0); k];
                let mut received = vec![vec![0u32; k]; n];
                for s in 0..steps {
                    let mut into = vec![0u32; n];
                    let mut arrivals = Vec::new();
                    for (v, held) in held_since.iter().enumerate() {
                        if let Some((to, b)) = transfer(v, s, l, k) {
                            assert!(to < n && to != 0, "l={l} k={k} s={s}: {v} -> {to}");
                            let since = held[b];
                            assert!(
                                since.is_some_and(|t| v == 0 || t < s + 1),
                                "l={l} k={k} s={s}: vertex {v} sends block {b} it lacks"
                            );
                            into[to] += 1;
                            arrivals.push((to, b));
                        }
                    }
                    assert!(into.iter().all(|&c| c <= 1), "l={l} k={k} s={s}: {into:?}");
                    for (to, b) in arrivals {
                        received[to][b] += 1;
                        // Usable from the next step on.
                        held_since[to][b].get_or_insert(s + 1);
                    }
                    if s < k {
                        assert!(transfer(0, s, l, k).is_some(), "root idle at {s}");
                    }
                }
                for (v, r) in received.iter().enumerate().skip(1) {
                    assert!(r.iter().all(|&c| c == 1), "l={l} k={k} vertex {v}: {r:?}");
                }
                assert!(received[0].iter().all(|&c| c == 0));
            }
        }
    }

    /// The per-vertex lists are the schedule in step order, and forwarding follows receipt
    /// along each list: a block is always received at a step before the one it is sent at.
    #[test]
    fn lists_are_in_step_order() {
        let (l, k) = (3u32, 5usize);
        let total: usize = (0..8).map(|v| binomial_pipeline(v, l, k).len()).sum();
        assert_eq!(
            total,
            7 * k,
            "each of 7 receivers gets each of {k} blocks once"
        );
        assert_eq!(binomial_pipeline(0, l, k).len(), k + l as usize - 1);
        assert_eq!(binomial_pipeline(0, l, k)[..3], [(1, 0), (2, 1), (4, 2)]);
        assert!(binomial_pipeline(3, 0, k).is_empty());
        assert_eq!(hypercube_dim(8), Some(3));
        assert_eq!(hypercube_dim(6), None);
        assert_eq!(hypercube_dim(1), None);
    }
}
