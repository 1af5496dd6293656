//! The graph executor: resolves a DAG of sub-questions in topological order (Kahn's algorithm),
//! running every ready node concurrently. The graph may grow while it runs: a node can ask to be
//! replaced by a child graph, whose roots inherit the node's predecessors and whose sinks feed the
//! node, which then runs again (in its `Aggregate` phase) to answer from its children.
//!
//! Graph mutations happen only in the executor loop, never in node tasks, so no locking is needed
//! and the order of events is deterministic for a deterministic backend.

use std::collections::BTreeMap;
use std::future::Future;

use futures::stream::{FuturesUnordered, StreamExt};

/// What a node task is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// First visit: answer the question (and maybe ask for a child graph).
    Resolve,
    /// Its child graph is answered: produce the node's answer from the children.
    Aggregate,
}

/// Everything a node task needs, copied out of the graph.
#[derive(Debug, Clone)]
pub struct NodeTask {
    pub id: String,
    pub question: String,
    pub phase: Phase,
    pub depth: u32,
    /// Whether the node has predecessors in the graph (internal node) or not (leaf).
    pub has_parents: bool,
    /// `(question, answer)` of every answered ancestor, in the order they were answered.
    pub dialog: Vec<(String, String)>,
}

/// A child graph a node asks to be replaced by. Ids are local (`1..=n`); the executor names them
/// `<node>.<i>`. `edges` are between local ids; children without successors feed the node.
#[derive(Debug, Clone, Default)]
pub struct ChildGraph {
    pub questions: Vec<String>,
    pub edges: Vec<(usize, usize)>,
}

#[derive(Debug, Clone)]
pub enum NodeOutcome {
    /// The node is answered; `question` is the form it was answered as (e.g. after rewriting).
    Answered {
        question: String,
        answer: String,
    },
    Expand(ChildGraph),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    Done,
}

#[derive(Debug, Clone)]
struct GraphNode {
    question: String,
    preds: Vec<String>,
    depth: u32,
    phase: Phase,
    state: State,
    answer: Option<(String, String)>,
    /// Position in answer order, for dialogs.
    answered_at: usize,
}

/// A DAG of sub-questions keyed by string ids.
#[derive(Debug, Clone, Default)]
pub struct Dag {
    nodes: BTreeMap<String, GraphNode>,
    answered: usize,
}

/// Notifications the executor sends while it runs, so the strategy can mirror the graph into the
/// trace as it changes.
pub trait GraphObserver {
    fn child_added(&mut self, _parent: &str, _id: &str, _question: &str, _preds: &[String], _depth: u32) {}
}

impl GraphObserver for () {}

impl Dag {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node. Predecessors must be added before the executor runs; unknown predecessor ids
    /// are ignored (they can never block the node).
    pub fn add_node(&mut self, id: &str, question: &str, preds: Vec<String>, depth: u32) {
        self.nodes.insert(
            id.to_string(),
            GraphNode {
                question: question.to_string(),
                preds,
                depth,
                phase: Phase::Resolve,
                state: State::Pending,
                answer: None,
                answered_at: 0,
            },
        );
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `(id, question, answer)` of answered nodes in the order they were answered.
    pub fn answers(&self) -> Vec<(String, String, String)> {
        let mut done: Vec<_> = self
            .nodes
            .iter()
            .filter_map(|(id, n)| n.answer.as_ref().map(|(q, a)| (n.answered_at, id.clone(), q.clone(), a.clone())))
            .collect();
        done.sort();
        done.into_iter().map(|(_, id, q, a)| (id, q, a)).collect()
    }

    /// Ids of nodes that never got an answer (only possible when the graph was malformed).
    pub fn unanswered(&self) -> Vec<String> {
        self.nodes.iter().filter(|(_, n)| n.answer.is_none()).map(|(id, _)| id.clone()).collect()
    }

    fn is_ready(&self, node: &GraphNode) -> bool {
        node.state == State::Pending
            && node.preds.iter().all(|p| self.nodes.get(p).is_none_or(|pn| pn.state == State::Done))
    }

    fn ancestors_dialog(&self, id: &str) -> Vec<(String, String)> {
        let mut seen = std::collections::HashSet::new();
        let mut stack: Vec<String> = self.nodes.get(id).map(|n| n.preds.clone()).unwrap_or_default();
        let mut found = Vec::new();
        while let Some(p) = stack.pop() {
            if !seen.insert(p.clone()) {
                continue;
            }
            if let Some(node) = self.nodes.get(&p) {
                if let Some((q, a)) = &node.answer {
                    found.push((node.answered_at, q.clone(), a.clone()));
                }
                stack.extend(node.preds.iter().cloned());
            }
        }
        found.sort_by_key(|(at, _, _)| *at);
        found.into_iter().map(|(_, q, a)| (q, a)).collect()
    }

    fn task(&self, id: &str) -> Option<NodeTask> {
        let node = self.nodes.get(id)?;
        Some(NodeTask {
            id: id.to_string(),
            question: node.question.clone(),
            phase: node.phase,
            depth: node.depth,
            has_parents: node.preds.iter().any(|p| self.nodes.contains_key(p)),
            dialog: self.ancestors_dialog(id),
        })
    }

    fn splice(&mut self, id: &str, child: ChildGraph, observer: &mut (dyn GraphObserver + Send)) {
        let Some(node) = self.nodes.get(id).cloned() else { return };
        let n = child.questions.len();
        let child_id = |i: usize| format!("{id}.{i}");
        let mut has_succ = vec![false; n + 1];
        let mut preds: Vec<Vec<String>> = vec![Vec::new(); n + 1];
        for &(a, b) in &child.edges {
            if (1..=n).contains(&a) && (1..=n).contains(&b) && a != b {
                has_succ[a] = true;
                preds[b].push(child_id(a));
            }
        }
        let mut sinks = Vec::new();
        for (i, question) in child.questions.iter().enumerate().map(|(i, q)| (i + 1, q)) {
            let mut p = if preds[i].is_empty() { node.preds.clone() } else { preds[i].clone() };
            p.dedup();
            observer.child_added(id, &child_id(i), question, &p, node.depth + 1);
            self.add_node(&child_id(i), question, p, node.depth + 1);
            if !has_succ[i] {
                sinks.push(child_id(i));
            }
        }
        if let Some(parent) = self.nodes.get_mut(id) {
            parent.preds.extend(sinks);
            parent.phase = Phase::Aggregate;
            parent.state = State::Pending;
        }
    }

    /// Runs the graph to completion. `work` is called once per node visit; every node that is ready
    /// at the same time runs concurrently. Returns when no node can run any more.
    pub async fn execute<F, Fut>(&mut self, work: F, observer: &mut (dyn GraphObserver + Send))
    where
        F: Fn(NodeTask) -> Fut,
        Fut: Future<Output = NodeOutcome>,
    {
        let mut running = FuturesUnordered::new();
        loop {
            let ready: Vec<String> =
                self.nodes.iter().filter(|(_, n)| self.is_ready(n)).map(|(id, _)| id.clone()).collect();
            for id in ready {
                if let Some(task) = self.task(&id) {
                    if let Some(node) = self.nodes.get_mut(&id) {
                        node.state = State::Running;
                    }
                    let fut = work(task);
                    running.push(async move { (id, fut.await) });
                }
            }
            let Some((id, outcome)) = running.next().await else { break };
            match outcome {
                NodeOutcome::Answered { question, answer } => {
                    self.answered += 1;
                    let at = self.answered;
                    if let Some(node) = self.nodes.get_mut(&id) {
                        node.state = State::Done;
                        node.answer = Some((question, answer));
                        node.answered_at = at;
                    }
                }
                NodeOutcome::Expand(child) if !child.questions.is_empty() => {
                    let already_expanded = self.nodes.get(&id).is_some_and(|n| n.phase == Phase::Aggregate);
                    if already_expanded {
                        // A node expands at most once; treat a second request as an empty answer.
                        self.answered += 1;
                        let at = self.answered;
                        if let Some(node) = self.nodes.get_mut(&id) {
                            node.state = State::Done;
                            node.answer = Some((node.question.clone(), String::new()));
                            node.answered_at = at;
                        }
                    } else {
                        self.splice(&id, child, observer);
                    }
                }
                NodeOutcome::Expand(_) => {
                    // An empty child graph cannot answer anything: the node is done without answer.
                    if let Some(node) = self.nodes.get_mut(&id) {
                        node.state = State::Done;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    fn chain_and_fan() -> Dag {
        // 1 and 2 independent, 3 depends on both.
        let mut dag = Dag::new();
        dag.add_node("1", "a?", vec![], 0);
        dag.add_node("2", "b?", vec![], 0);
        dag.add_node("3", "c?", vec!["1".into(), "2".into()], 0);
        dag
    }

    #[tokio::test]
    async fn independent_nodes_overlap_and_dependents_wait() {
        let mut dag = chain_and_fan();
        let spans = Arc::new(Mutex::new(BTreeMap::new()));
        let t0 = Instant::now();
        let s = spans.clone();
        dag.execute(
            move |task: NodeTask| {
                let s = s.clone();
                async move {
                    let start = t0.elapsed();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    s.lock().unwrap().insert(task.id.clone(), (start, t0.elapsed(), task.dialog.len()));
                    NodeOutcome::Answered { question: task.question.clone(), answer: format!("ans-{}", task.id) }
                }
            },
            &mut (),
        )
        .await;
        let spans = spans.lock().unwrap();
        let (s1, e1, _) = spans["1"];
        let (s2, e2, _) = spans["2"];
        let (s3, _, d3) = spans["3"];
        assert!(s1 < e2 && s2 < e1, "1 and 2 overlap");
        assert!(s3 >= e1 && s3 >= e2, "3 starts after both parents");
        assert_eq!(d3, 2, "3 sees both parents' answers");
        assert_eq!(dag.answers().len(), 3);
    }

    #[tokio::test]
    async fn expansion_splices_children_and_reruns_parent() {
        let mut dag = Dag::new();
        dag.add_node("1", "hard?", vec![], 0);
        dag.add_node("2", "next?", vec!["1".into()], 0);
        struct Seen(Vec<String>);
        impl GraphObserver for Seen {
            fn child_added(&mut self, _p: &str, id: &str, _q: &str, _preds: &[String], depth: u32) {
                assert_eq!(depth, 1);
                self.0.push(id.to_string());
            }
        }
        let mut seen = Seen(Vec::new());
        dag.execute(
            |task: NodeTask| async move {
                match (task.id.as_str(), task.phase) {
                    ("1", Phase::Resolve) => NodeOutcome::Expand(ChildGraph {
                        questions: vec!["part a?".into(), "part b?".into()],
                        edges: vec![(1, 2)],
                    }),
                    ("1", Phase::Aggregate) => {
                        assert_eq!(task.dialog.len(), 2, "parent sees both children");
                        NodeOutcome::Answered { question: task.question, answer: "combined".into() }
                    }
                    (id, _) => NodeOutcome::Answered { question: task.question.clone(), answer: id.to_string() },
                }
            },
            &mut seen,
        )
        .await;
        assert_eq!(seen.0, vec!["1.1", "1.2"]);
        let order: Vec<String> = dag.answers().into_iter().map(|(id, _, _)| id).collect();
        assert_eq!(order, vec!["1.1", "1.2", "1", "2"]);
        assert!(dag.unanswered().is_empty());
    }

    #[tokio::test]
    async fn repeated_expansion_terminates() {
        let mut dag = Dag::new();
        dag.add_node("1", "x?", vec![], 0);
        dag.execute(
            |task: NodeTask| async move {
                if task.id == "1" {
                    NodeOutcome::Expand(ChildGraph { questions: vec!["y?".into()], edges: vec![] })
                } else {
                    NodeOutcome::Answered { question: task.question, answer: "y".into() }
                }
            },
            &mut (),
        )
        .await;
        assert_eq!(dag.len(), 2);
        assert!(dag.unanswered().is_empty());
    }
}
