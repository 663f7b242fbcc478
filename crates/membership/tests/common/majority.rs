//! The running-mode majority check shared by the `common` and `group_sim` test harnesses.

/// Running mode: the decision node `i` holds for its view (decided or echoed) makes a next view
/// that holds a majority of the view (joiners do not count). Checked after every poll, so a
/// decision that would stop every member with `Minority` at the install fails the run where it
/// is decided (s30, ninety-seventh part of `docs/MEMBERSHIP.md`: a leave and a failure in one
/// change). A restarting member is left to the restart's own checks. Shared by `common`'s
/// `Cluster` and `group_sim`'s `Group` runs.
pub fn check_decision_keeps_a_majority<
    T: squall_transport::Transport,
    L: squall_membership::log::Durable,
>(
    i: usize,
    g: &squall_membership::Gms<T, L>,
) -> Result<(), String> {
    if g.restarting().is_some() {
        return Ok(());
    }
    let (Some(v), Some(d)) = (g.view(), g.decision()) else {
        return Ok(());
    };
    let next = d.next_members(&v.members);
    let kept = v.members.iter().filter(|m| next.contains(m)).count();
    if 2 * kept <= v.members.len() {
        return Err(format!(
            "n{i} holds a decision for view {} {:?} whose next view {next:?} holds no majority of it: {:?}",
            v.id, v.members, d.changes
        ));
    }
    Ok(())
}
