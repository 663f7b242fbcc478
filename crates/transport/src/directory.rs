//! Validation of posted ops against what a node knows of its own and its peers' regions.
//!
//! Every transport must refuse a bad op at post time and never apply it. This is the one place
//! that rule is written; fabrics call it before they queue anything.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{PostError, RegionError};
use crate::ids::{NodeId, RegionId};
use crate::op::{LocalSlice, RemoteAddr};
use crate::region::Region;

/// A node's view of the cluster: its own regions, its peers, and the regions they registered.
///
/// ```
/// use squall_transport::{Directory, NodeId, Region, RegionId, RegionSpec, RemoteAddr, LocalSlice};
/// let spec = RegionSpec::new(RegionId(0), 64);
/// let mut d = Directory::new(NodeId(0));
/// d.add_local(Region::new(spec).unwrap()).unwrap();
/// d.add_peer(NodeId(1), &[spec]);
/// assert!(d.check_write(NodeId(1), LocalSlice::new(RegionId(0), 0, 8), RemoteAddr::new(RegionId(0), 56)).is_ok());
/// assert!(d.check_write(NodeId(1), LocalSlice::new(RegionId(0), 0, 16), RemoteAddr::new(RegionId(0), 56)).is_err());
/// assert!(d.check_atomic(NodeId(1), RemoteAddr::new(RegionId(0), 4)).is_err());
/// ```
#[derive(Clone, Debug)]
pub struct Directory {
    me: NodeId,
    local: Vec<Region>,
    peers: Vec<NodeId>,
    remote: BTreeMap<(NodeId, RegionId), usize>,
    /// Peers not connected yet: ops to them are refused with `NotConnected`.
    absent: BTreeSet<NodeId>,
}

impl Directory {
    /// An empty directory for node `me`.
    pub fn new(me: NodeId) -> Directory {
        Directory {
            me,
            local: Vec::new(),
            peers: Vec::new(),
            remote: BTreeMap::new(),
            absent: BTreeSet::new(),
        }
    }

    /// This node.
    pub fn me(&self) -> NodeId {
        self.me
    }

    /// Registers a local region.
    pub fn add_local(&mut self, region: Region) -> Result<(), RegionError> {
        if self.local.iter().any(|r| r.id() == region.id()) {
            return Err(RegionError::Duplicate {
                region: region.id(),
            });
        }
        self.local.push(region);
        Ok(())
    }

    /// Records a connected peer and the regions it registered (an absent peer becomes
    /// connected). Ignores `me`.
    pub fn add_peer(&mut self, peer: NodeId, regions: &[crate::RegionSpec]) {
        if peer == self.me {
            return;
        }
        if let Err(at) = self.peers.binary_search(&peer) {
            self.peers.insert(at, peer);
        }
        self.absent.remove(&peer);
        for spec in regions {
            self.remote.insert((peer, spec.id), spec.len);
        }
    }

    /// Records a configured peer whose link is not up yet: it is listed among the peers, and
    /// every op to it is refused with [`PostError::NotConnected`] until [`add_peer`](Self::add_peer)
    /// records its regions. Ignores `me` and peers already known.
    ///
    /// ```
    /// use squall_transport::{Directory, NodeId, PostError};
    /// let mut d = Directory::new(NodeId(0));
    /// d.add_absent_peer(NodeId(2));
    /// assert!(d.is_absent(NodeId(2)));
    /// assert_eq!(d.check_fence(NodeId(2)), Err(PostError::NotConnected { peer: NodeId(2) }));
    /// d.add_peer(NodeId(2), &[]);
    /// assert!(d.check_fence(NodeId(2)).is_ok());
    /// ```
    pub fn add_absent_peer(&mut self, peer: NodeId) {
        if peer == self.me || self.is_peer(peer) {
            return;
        }
        if let Err(at) = self.peers.binary_search(&peer) {
            self.peers.insert(at, peer);
        }
        self.absent.insert(peer);
    }

    /// Whether `peer` is a configured peer whose link is not up yet.
    pub fn is_absent(&self, peer: NodeId) -> bool {
        self.absent.contains(&peer)
    }

    /// The peers, ascending.
    pub fn peers(&self) -> &[NodeId] {
        &self.peers
    }

    /// Whether `peer` is a known peer.
    pub fn is_peer(&self, peer: NodeId) -> bool {
        self.peers.binary_search(&peer).is_ok()
    }

    /// A local region.
    pub fn local(&self, id: RegionId) -> Option<&Region> {
        self.local.iter().find(|r| r.id() == id)
    }

    /// All local regions.
    pub fn locals(&self) -> &[Region] {
        &self.local
    }

    /// The length of a peer's region.
    pub fn remote_len(&self, peer: NodeId, id: RegionId) -> Option<usize> {
        self.remote.get(&(peer, id)).copied()
    }

    fn check_peer(&self, peer: NodeId) -> Result<(), PostError> {
        if self.absent.contains(&peer) {
            Err(PostError::NotConnected { peer })
        } else if self.is_peer(peer) {
            Ok(())
        } else {
            Err(PostError::UnknownPeer { peer })
        }
    }

    /// Checks a local range and returns its region.
    pub fn check_local(&self, s: LocalSlice) -> Result<&Region, PostError> {
        let region = self
            .local(s.region)
            .ok_or(PostError::UnknownLocalRegion { region: s.region })?;
        region
            .check_range(s.offset, s.len)
            .map_err(|source| PostError::OutOfBounds {
                node: self.me,
                source,
            })?;
        Ok(region)
    }

    /// Checks a remote range.
    pub fn check_remote(&self, peer: NodeId, a: RemoteAddr, len: usize) -> Result<(), PostError> {
        self.check_peer(peer)?;
        let region_len = self
            .remote_len(peer, a.region)
            .ok_or(PostError::UnknownRemoteRegion {
                peer,
                region: a.region,
            })?;
        match a.offset.checked_add(len) {
            Some(end) if end <= region_len => Ok(()),
            _ => Err(PostError::OutOfBounds {
                node: peer,
                source: RegionError::OutOfBounds {
                    region: a.region,
                    offset: a.offset,
                    len,
                    region_len,
                },
            }),
        }
    }

    /// Checks a write of local `src` to `dst` on `peer`.
    pub fn check_write(
        &self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
    ) -> Result<&Region, PostError> {
        self.check_remote(peer, dst, src.len)?;
        self.check_local(src)
    }

    /// Checks an atomic on the word at `word` on `peer`.
    pub fn check_atomic(&self, peer: NodeId, word: RemoteAddr) -> Result<(), PostError> {
        self.check_remote(peer, word, 8)?;
        if word.offset % 8 != 0 {
            return Err(PostError::Misaligned {
                region: word.region,
                offset: word.offset,
            });
        }
        Ok(())
    }

    /// Checks a send of `len` bytes against `max`.
    pub fn check_send(&self, peer: NodeId, len: usize, max: usize) -> Result<(), PostError> {
        self.check_peer(peer)?;
        if len > max {
            return Err(PostError::MessageTooLarge { len, max });
        }
        Ok(())
    }

    /// Checks a fence.
    pub fn check_fence(&self, peer: NodeId) -> Result<(), PostError> {
        self.check_peer(peer)
    }
}
