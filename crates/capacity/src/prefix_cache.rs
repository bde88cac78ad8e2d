//! A replica's prefix cache: full KV blocks of shared prompt prefixes, kept after the
//! requests that computed them finish, reused by later requests with the same prefix, and
//! evicted least recently used first when the KV cache needs the blocks.
//!
//! It follows vLLM's automatic prefix caching (`vllm/v1/core/kv_cache_manager.py` and
//! `block_pool.py` at the commit [`crate::sim`] cites) at the granularity a trace gives: a
//! trace names a request's prefix by an id and a length (`prefix_id`, `prefix_tokens`), not
//! by its tokens, so an entry is the number of leading full blocks of one prefix that are
//! resident. As in vLLM:
//! - only full blocks are cached, and a hit is a whole number of blocks;
//! - a request whose whole prompt hits still computes its last token (vLLM caps the hit at
//!   `num_tokens - 1` to get the logits), so a hit is at most `(prompt - 1) / block` blocks;
//! - blocks in use by a running request are pinned; unpinned cached blocks still hold KV
//!   memory but are free for reuse, and the least recently released go first, a prefix's
//!   tail blocks before its head;
//! - a prefix's blocks enter the cache once a request has computed them: here, when that
//!   request's prefill completes (vLLM caches each block as it fills; the difference is at
//!   most one prefill, during which a second request with the same prefix computes it too).

use std::collections::BTreeSet;

/// One prefix's resident blocks on one replica.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    /// Leading full blocks of the prefix that are resident.
    blocks: u32,
    /// Running requests that use this prefix; while any do, its blocks are pinned.
    refs: u32,
    /// When it was last released (a counter; orders the unpinned entries).
    released: u64,
    /// The staleness snapshot: `blocks` as of the router's last refresh, valid when
    /// `changed_in` is the current epoch (see [`PrefixCache::seen_blocks`]).
    blocks_before: u32,
    changed_in: u64,
}

/// The prefix cache of one replica; prefix ids are indices into the trace's prefixes.
#[derive(Clone, Debug)]
pub(crate) struct PrefixCache {
    entries: Vec<Entry>,
    /// Unpinned entries that hold blocks, least recently released first.
    idle: BTreeSet<(u64, u32)>,
    /// Blocks held by unpinned entries: free for reuse, evicted on demand.
    idle_blocks: u64,
    clock: u64,
    /// The router's refresh count (see [`PrefixCache::seen_blocks`]).
    epoch: u64,
}

impl PrefixCache {
    pub(crate) fn new(prefixes: usize) -> PrefixCache {
        PrefixCache {
            entries: vec![Entry::default(); prefixes],
            idle: BTreeSet::new(),
            idle_blocks: 0,
            clock: 0,
            epoch: 0,
        }
    }

    /// Blocks of prefix `id` resident now.
    pub(crate) fn blocks(&self, id: u32) -> u32 {
        self.entries[id as usize].blocks
    }

    /// Blocks of prefix `id` as the router last saw them: at its last refresh
    /// ([`PrefixCache::refresh`]). A change records the old value once per epoch, so a
    /// stale view costs nothing per prefix at refresh time.
    pub(crate) fn seen_blocks(&self, id: u32) -> u32 {
        let e = &self.entries[id as usize];
        if e.changed_in == self.epoch {
            e.blocks_before
        } else {
            e.blocks
        }
    }

    /// The router's view catches up with the cache.
    pub(crate) fn refresh(&mut self) {
        self.epoch += 1;
    }

    /// Cached blocks that are not pinned: held, but free for a new allocation.
    pub(crate) fn idle_blocks(&self) -> u64 {
        self.idle_blocks
    }

    fn set_blocks(&mut self, id: u32, blocks: u32) {
        let epoch = self.epoch;
        let e = &mut self.entries[id as usize];
        if e.changed_in != epoch {
            e.blocks_before = e.blocks;
            e.changed_in = epoch;
        }
        e.blocks = blocks;
    }

    /// Idle blocks available to an allocation that will pin prefix `keep` (whose own idle
    /// blocks are about to be reused, not evicted).
    pub(crate) fn evictable_besides(&self, keep: Option<u32>) -> u64 {
        match keep {
            Some(id) if self.entries[id as usize].refs == 0 => {
                self.idle_blocks - self.entries[id as usize].blocks as u64
            }
            _ => self.idle_blocks,
        }
    }

    /// A running request starts to use prefix `id`: its blocks are pinned.
    pub(crate) fn pin(&mut self, id: u32) {
        let e = &mut self.entries[id as usize];
        if e.refs == 0 && e.blocks > 0 {
            self.idle.remove(&(e.released, id));
            self.idle_blocks -= e.blocks as u64;
        }
        e.refs += 1;
    }

    /// A request that used prefix `id` finished or was preempted; when none uses it any
    /// more, its blocks become the most recently released idle ones.
    pub(crate) fn unpin(&mut self, id: u32) {
        self.clock += 1;
        let clock = self.clock;
        let e = &mut self.entries[id as usize];
        e.refs -= 1;
        if e.refs == 0 {
            e.released = clock;
            if e.blocks > 0 {
                self.idle.insert((clock, id));
                self.idle_blocks += e.blocks as u64;
            }
        }
    }

    /// A pinned prefix's first `blocks` full blocks have been computed by a request that
    /// holds them privately: the ones the cache lacks pass to the cache. Returns how many
    /// of the request's blocks the cache took.
    pub(crate) fn adopt(&mut self, id: u32, blocks: u32) -> u32 {
        let have = self.entries[id as usize].blocks;
        if blocks <= have {
            return 0;
        }
        self.set_blocks(id, blocks);
        blocks - have
    }

    /// Evicts up to `wanted` idle blocks, least recently released entries first and each
    /// entry's tail first; returns how many were freed.
    pub(crate) fn evict(&mut self, wanted: u64) -> u64 {
        let mut freed = 0;
        while freed < wanted {
            let Some(&(released, id)) = self.idle.first() else {
                break;
            };
            let have = self.entries[id as usize].blocks;
            let take = (wanted - freed).min(have as u64) as u32;
            self.set_blocks(id, have - take);
            self.idle_blocks -= take as u64;
            freed += take as u64;
            if have == take {
                self.idle.remove(&(released, id));
            }
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_blocks_are_never_evicted_and_the_least_recently_released_go_first() {
        let mut c = PrefixCache::new(3);
        for id in 0..3 {
            c.pin(id);
            assert_eq!(c.adopt(id, 4), 4);
        }
        // Nothing idle while all are pinned.
        assert_eq!(c.idle_blocks(), 0);
        assert_eq!(c.evict(5), 0);
        c.unpin(2);
        c.unpin(0);
        assert_eq!(c.idle_blocks(), 8);
        // 2 was released first: its four blocks go, then the tail of 0.
        assert_eq!(c.evict(5), 5);
        assert_eq!((c.blocks(0), c.blocks(1), c.blocks(2)), (3, 4, 0));
        assert_eq!(c.idle_blocks(), 3);
        // Pinning 0 again takes its remaining blocks out of the idle pool.
        assert_eq!(c.evictable_besides(Some(0)), 0);
        c.pin(0);
        assert_eq!(c.idle_blocks(), 0);
        assert_eq!(c.evict(1), 0);
        // A longer computation of the prefix adds only what the cache lacks.
        assert_eq!(c.adopt(0, 5), 2);
        assert_eq!(c.adopt(0, 2), 0);
        assert_eq!(c.blocks(0), 5);
    }

    #[test]
    fn the_routers_view_is_the_cache_as_of_its_last_refresh() {
        let mut c = PrefixCache::new(1);
        c.pin(0);
        c.adopt(0, 3);
        assert_eq!(
            c.seen_blocks(0),
            0,
            "not refreshed since the blocks arrived"
        );
        c.refresh();
        assert_eq!(c.seen_blocks(0), 3);
        c.adopt(0, 6);
        c.unpin(0);
        c.evict(6);
        assert_eq!((c.blocks(0), c.seen_blocks(0)), (0, 3));
        c.refresh();
        assert_eq!(c.seen_blocks(0), 0);
    }
}
