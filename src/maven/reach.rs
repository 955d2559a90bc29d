//! Which dependencies each module of the graph may follow, as Ivy decides it
//! (`IvyNodeCallers.doesCallersExclude`): a module's dependency `g:a` is left
//! out only when every caller of the module excludes it, either on its edge to
//! the module (an `<exclusion>` matching `g:a`) or because `g:a` is excluded at
//! the caller itself. The question is asked per `g:a`, so it is kept per key:
//! the set of modules where the key is *allowed*, grown as edges join the
//! graph. Each (module, key) pair is allowed once and then spreads along the
//! module's edges, so the whole cost is bounded by keys × edges, whatever the
//! shape of the exclusions; carrying one set of exclusions per path instead is
//! exponential (a lattice where each level excludes something else has 2^L
//! paths).

use std::collections::HashMap;

use super::coord::{Exclusion, Key};

/// The modules (nodes) and the keys allowed at each.
#[derive(Default)]
pub(super) struct Reach {
    ids: HashMap<Key, usize>,
    keys: Vec<Key>,
    nodes: Vec<Node>,
}

#[derive(Default)]
struct Node {
    /// A package asked for: every key is allowed there.
    root: bool,
    allowed: Bits,
    /// Edges to the modules it depends on, with the edge's exclusions.
    out: Vec<(usize, Vec<Exclusion>)>,
}

/// (node, key) pairs newly allowed.
pub(super) type Allowed = Vec<(usize, usize)>;

impl Reach {
    /// A new module; a root allows every key known and every key to come.
    pub(super) fn add_node(&mut self, root: bool) -> usize {
        let mut node = Node {
            root,
            ..Node::default()
        };
        if root {
            for k in 0..self.keys.len() {
                node.allowed.insert(k);
            }
        }
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Makes `node` a root (a package asked for that was reached before).
    pub(super) fn make_root(&mut self, node: usize) -> Allowed {
        let mut allowed = Vec::new();
        self.nodes[node].root = true;
        for k in 0..self.keys.len() {
            self.spread(node, k, &mut allowed);
        }
        allowed
    }

    /// The id of `key`, interned on first sight: then allowed wherever a root
    /// reaches along edges that do not exclude it (returned).
    pub(super) fn key(&mut self, key: &Key) -> (usize, Allowed) {
        if let Some(&id) = self.ids.get(key) {
            return (id, Vec::new());
        }
        let id = self.keys.len();
        self.ids.insert(key.clone(), id);
        self.keys.push(key.clone());
        let mut allowed = Vec::new();
        let roots: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| self.nodes[n].root)
            .collect();
        for n in roots {
            self.spread(n, id, &mut allowed);
        }
        (id, allowed)
    }

    /// Whether `key` is allowed at `node`.
    pub(super) fn allows(&self, node: usize, key: usize) -> bool {
        self.nodes[node].allowed.contains(key)
    }

    /// An edge `from -> to` excluding `exclusions`: every key allowed at `from`
    /// and not excluded by the edge is allowed at `to`, and on from there.
    pub(super) fn link(&mut self, from: usize, to: usize, exclusions: &[Exclusion]) -> Allowed {
        self.nodes[from].out.push((to, exclusions.to_vec()));
        let mut allowed = Vec::new();
        let keys: Vec<usize> = self.nodes[from].allowed.iter().collect();
        for k in keys {
            let (g, a) = &self.keys[k];
            if !exclusions.iter().any(|e| e.matches(g, a)) {
                self.spread(to, k, &mut allowed);
            }
        }
        allowed
    }

    /// Allows `key` at `start` and wherever it spreads from there.
    fn spread(&mut self, start: usize, key: usize, allowed: &mut Allowed) {
        let mut stack = vec![start];
        while let Some(n) = stack.pop() {
            if !self.nodes[n].allowed.insert(key) {
                continue;
            }
            allowed.push((n, key));
            let (g, a) = &self.keys[key];
            for (to, exclusions) in &self.nodes[n].out {
                if !exclusions.iter().any(|e| e.matches(g, a)) {
                    stack.push(*to);
                }
            }
        }
    }
}

/// A growable set of small integers.
#[derive(Default)]
struct Bits(Vec<u64>);

impl Bits {
    /// Adds `i`; whether it was absent.
    fn insert(&mut self, i: usize) -> bool {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.0.len() <= word {
            self.0.resize(word + 1, 0);
        }
        let absent = self.0[word] & bit == 0;
        self.0[word] |= bit;
        absent
    }

    fn contains(&self, i: usize) -> bool {
        self.0
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            (0..64)
                .filter(move |b| bits & (1u64 << b) != 0)
                .map(move |b| w * 64 + b)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(a: &str) -> Key {
        ("g".into(), a.into())
    }

    fn ex(a: &str) -> Vec<Exclusion> {
        vec![Exclusion {
            group: "g".into(),
            artifact: a.into(),
        }]
    }

    /// Ivy's rule per key: `x` is left out below `m` only when every caller
    /// excludes it; two callers excluding different keys exclude neither.
    #[test]
    fn a_key_is_excluded_only_where_every_caller_excludes_it() {
        let mut r = Reach::default();
        let root = r.add_node(true);
        let (a, b, m, c) = (
            r.add_node(false),
            r.add_node(false),
            r.add_node(false),
            r.add_node(false),
        );
        r.link(root, a, &[]);
        r.link(root, b, &[]);
        r.link(a, m, &ex("x"));
        let (x, _) = r.key(&key("x"));
        let (y, _) = r.key(&key("y"));
        assert!(!r.allows(m, x) && r.allows(m, y));
        r.link(m, c, &[]);
        assert!(!r.allows(c, x));
        // A second caller that excludes y, not x: x is allowed at m and below.
        let newly = r.link(b, m, &ex("y"));
        assert!(newly.contains(&(m, x)) && newly.contains(&(c, x)));
        assert!(r.allows(m, x) && r.allows(m, y) && r.allows(c, x));
        // A key first seen now is allowed along every path that does not exclude it.
        let (z, newly) = r.key(&key("z"));
        assert!(r.allows(c, z) && newly.len() == 5);
    }

    /// The lattice that was exponential with one set of exclusions per path:
    /// each (node, key) is allowed once.
    #[test]
    fn a_lattice_of_exclusions_costs_keys_times_edges() {
        let mut r = Reach::default();
        let root = r.add_node(true);
        let mut level = vec![root];
        let depth = 200;
        for i in 0..depth {
            let pair = [r.add_node(false), r.add_node(false)];
            let mut newly = 0;
            for &from in &level {
                newly += r.link(from, pair[0], &ex(&format!("a{i}"))).len();
                newly += r.link(from, pair[1], &[]).len();
            }
            newly += r.key(&key(&format!("a{i}"))).1.len();
            assert!(newly <= 4 * (i + 1) + 2, "{i}: {newly}");
            level = pair.to_vec();
        }
        assert_eq!(r.nodes.len(), 2 * depth + 1);
    }
}
