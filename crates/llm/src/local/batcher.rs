//! One encoder, many callers: concurrent embedding calls are merged into one forward pass.
//!
//! Every call of the in-process embedder (a server's requests, Python threads, Rust threads sharing a
//! searcher, an index build) tokenises its texts on its own thread, then puts the word pieces on one
//! queue and waits. A single batcher thread owns the model: it takes what is queued — the first call
//! always, then more in arrival order while the batch stays within `max_tokens` word pieces and
//! `max_texts` texts — runs one forward pass over all of it (on every core), and hands each caller its
//! rows. Calls that arrive meanwhile queue up and form the next batch, so the encoder is never idle
//! while work waits and a lone call goes straight through: no timer holds anything back. This is how
//! text-embeddings-inference batches on a CPU.
//!
//! A row's vector does not depend on the rows beside it (the encoder packs sequences without padding
//! and every product sums in a fixed order), so a caller gets exactly the vectors it would get alone.
//! A caller that goes away before its turn is dropped from the queue; one whose batch fails (a sequence
//! the model cannot take) is retried alone, so an error reaches only the call that caused it.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use super::bert::Bert;

/// What a caller gets back: its vectors, or why not.
pub(crate) type Reply = Result<Vec<Vec<f32>>, String>;

/// A forward pass: one vector per sequence, in order, on up to `threads` threads.
pub(crate) trait Encoder: Send + 'static {
    /// The vectors of `seqs`.
    fn forward(&self, seqs: &[Vec<u32>], threads: usize) -> Reply;
}

impl Encoder for Bert {
    fn forward(&self, seqs: &[Vec<u32>], threads: usize) -> Reply {
        self.embed(seqs, threads)
    }
}

/// One caller's texts as word pieces, and where its vectors go.
struct Request {
    seqs: Vec<Vec<u32>>,
    tokens: usize,
    reply: oneshot::Sender<Reply>,
}

#[derive(Default)]
struct State {
    pending: VecDeque<Request>,
    closed: bool,
}

/// The queue between callers and the batcher thread.
#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    ready: Condvar,
}

impl Queue {
    /// The state, also after a thread panicked holding the lock (the queue stays consistent: every
    /// change under the lock is a single push, pop or flag).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How large a merged batch may grow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Word pieces per forward pass (a single call larger than this still runs, alone).
    pub max_tokens: usize,
    /// Texts per forward pass.
    pub max_texts: usize,
}

/// The batcher: a queue and the thread that drains it. Dropping it lets the thread finish the calls
/// already queued, then stops it.
pub(crate) struct Batcher {
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

impl Batcher {
    /// Starts the batcher thread for `model`, whose forward passes use `threads` threads.
    pub(crate) fn start<M: Encoder>(
        model: M,
        threads: usize,
        bounds: Bounds,
        name: &str,
    ) -> std::io::Result<Self> {
        let queue = Arc::new(Queue::default());
        let q = Arc::clone(&queue);
        let thread = std::thread::Builder::new()
            .name(format!("kgrag-encoder-{name}"))
            .spawn(move || run(&q, &model, threads, bounds))?;
        Ok(Self {
            queue,
            thread: Some(thread),
        })
    }

    /// Queues `seqs` (word-piece ids of one call's texts) and waits for their vectors.
    pub(crate) async fn embed(&self, seqs: Vec<Vec<u32>>) -> Reply {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        let tokens = seqs.iter().map(Vec::len).sum();
        {
            let mut state = self.queue.lock();
            if state.closed {
                return Err("the encoder has stopped".to_owned());
            }
            state.pending.push_back(Request {
                seqs,
                tokens,
                reply,
            });
        }
        self.queue.ready.notify_one();
        answer
            .await
            .unwrap_or_else(|_| Err("the encoder stopped before this call's turn".to_owned()))
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        self.queue.lock().closed = true;
        self.queue.ready.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The batcher thread: waits for work (no timeout), takes a batch, runs it, replies; until closed and
/// drained.
fn run<M: Encoder>(queue: &Queue, model: &M, threads: usize, bounds: Bounds) {
    loop {
        let batch = {
            let mut state = queue.lock();
            loop {
                // Callers that went away are not computed for.
                state.pending.retain(|r| !r.reply.is_closed());
                if !state.pending.is_empty() {
                    break;
                }
                if state.closed {
                    return;
                }
                state = queue
                    .ready
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            take_batch(&mut state.pending, bounds)
        };
        run_batch(model, threads, batch);
    }
}

/// The first request, then more in arrival order while they fit the bounds.
fn take_batch(pending: &mut VecDeque<Request>, bounds: Bounds) -> Vec<Request> {
    let mut batch = Vec::new();
    let (mut tokens, mut texts) = (0usize, 0usize);
    while let Some(next) = pending.front() {
        let fits = tokens + next.tokens <= bounds.max_tokens
            && texts + next.seqs.len() <= bounds.max_texts;
        if !batch.is_empty() && !fits {
            break;
        }
        tokens += next.tokens;
        texts += next.seqs.len();
        if let Some(r) = pending.pop_front() {
            batch.push(r);
        }
    }
    batch
}

/// One forward pass over the whole batch; when it fails and more than one call is in it, each call is
/// run alone so that only the failing one gets the error.
fn run_batch<M: Encoder>(model: &M, threads: usize, batch: Vec<Request>) {
    if batch.len() == 1 {
        for r in batch {
            let out = forward(model, &r.seqs, threads);
            let _ = r.reply.send(out);
        }
        return;
    }
    let all: Vec<Vec<u32>> = batch.iter().flat_map(|r| r.seqs.iter().cloned()).collect();
    match forward(model, &all, threads) {
        Ok(mut rows) if rows.len() == all.len() => {
            // Hand out the rows back to front, so each caller's rows are split off the end.
            for r in batch.into_iter().rev() {
                let mine = rows.split_off(rows.len() - r.seqs.len());
                let _ = r.reply.send(Ok(mine));
            }
        }
        _ => {
            for r in batch {
                let out = forward(model, &r.seqs, threads);
                let _ = r.reply.send(out);
            }
        }
    }
}

/// The model's forward pass; a panic inside it becomes an error, so the batcher thread lives on.
fn forward<M: Encoder>(model: &M, seqs: &[Vec<u32>], threads: usize) -> Reply {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        model.forward(seqs, threads)
    }))
    .unwrap_or_else(|_| Err("the encoder panicked on this batch".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tokens: &[usize]) -> (Request, oneshot::Receiver<Reply>) {
        let (reply, rx) = oneshot::channel();
        let seqs: Vec<Vec<u32>> = tokens.iter().map(|&n| vec![1; n]).collect();
        (
            Request {
                tokens: tokens.iter().sum(),
                seqs,
                reply,
            },
            rx,
        )
    }

    #[test]
    fn batches_take_calls_in_order_within_the_bounds() {
        let bounds = Bounds {
            max_tokens: 100,
            max_texts: 3,
        };
        let mut pending = VecDeque::new();
        let mut keep = Vec::new();
        for t in [&[40][..], &[30, 20], &[5], &[5]] {
            let (r, rx) = request(t);
            pending.push_back(r);
            keep.push(rx);
        }
        // 40 + 50 tokens, 3 texts: the third call (a fourth text) waits for the next batch.
        let first = take_batch(&mut pending, bounds);
        assert_eq!(first.iter().map(|r| r.tokens).collect::<Vec<_>>(), [40, 50]);
        let second = take_batch(&mut pending, bounds);
        assert_eq!(second.len(), 2);
        assert!(pending.is_empty());
    }

    /// A stand-in model: a sequence's vector is its ids as floats, summed and counted; token 0 is
    /// refused; every pass waits `delay` and records its size.
    struct Fake {
        delay: std::time::Duration,
        passes: Arc<Mutex<Vec<usize>>>,
    }

    impl Encoder for Fake {
        fn forward(&self, seqs: &[Vec<u32>], _threads: usize) -> Reply {
            std::thread::sleep(self.delay);
            self.passes.lock().unwrap().push(seqs.len());
            if seqs.iter().any(|s| s.contains(&0)) {
                return Err("token 0".to_owned());
            }
            Ok(seqs
                .iter()
                .map(|s| vec![s.iter().sum::<u32>() as f32, s.len() as f32])
                .collect())
        }
    }

    fn fake(delay_ms: u64) -> (Arc<Batcher>, Arc<Mutex<Vec<usize>>>) {
        let passes = Arc::new(Mutex::new(Vec::new()));
        let model = Fake {
            delay: std::time::Duration::from_millis(delay_ms),
            passes: Arc::clone(&passes),
        };
        let bounds = Bounds {
            max_tokens: 1_000,
            max_texts: 100,
        };
        (
            Arc::new(Batcher::start(model, 1, bounds, "fake").unwrap()),
            passes,
        )
    }

    /// `seqs` embedded by `batcher` on a task of its own.
    fn call(batcher: &Arc<Batcher>, seqs: Vec<Vec<u32>>) -> tokio::task::JoinHandle<Reply> {
        let b = Arc::clone(batcher);
        tokio::spawn(async move { b.embed(seqs).await })
    }

    fn want(seqs: &[Vec<u32>]) -> Vec<Vec<f32>> {
        seqs.iter()
            .map(|s| vec![s.iter().sum::<u32>() as f32, s.len() as f32])
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_calls_share_passes_and_get_their_own_rows() {
        let (batcher, passes) = fake(20);
        let calls: Vec<Vec<Vec<u32>>> = (1..=40u32)
            .map(|i| {
                (0..(i % 3 + 1))
                    .map(|j| vec![i; (j + 1) as usize])
                    .collect()
            })
            .collect();
        let tasks: Vec<_> = calls
            .iter()
            .cloned()
            .map(|seqs| call(&batcher, seqs))
            .collect();
        for (seqs, task) in calls.iter().zip(tasks) {
            assert_eq!(task.await.unwrap().unwrap(), want(seqs));
        }
        let passes = passes.lock().unwrap().clone();
        assert_eq!(
            passes.iter().sum::<usize>(),
            calls.iter().map(Vec::len).sum::<usize>()
        );
        assert!(
            passes.len() < calls.len(),
            "40 concurrent calls took {} passes",
            passes.len()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn an_error_in_one_call_fails_only_that_call() {
        let (batcher, _) = fake(20);
        // The first call keeps the encoder busy while the others queue into one batch.
        let first = call(&batcher, vec![vec![9]]);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let tasks: Vec<_> = (1..=6u32)
            .map(|i| {
                let seqs = if i == 3 {
                    vec![vec![5, 0]]
                } else {
                    vec![vec![i, i]]
                };
                (i, call(&batcher, seqs))
            })
            .collect();
        assert_eq!(first.await.unwrap().unwrap(), want(&[vec![9]]));
        for (i, task) in tasks {
            let out = task.await.unwrap();
            if i == 3 {
                assert_eq!(out.unwrap_err(), "token 0");
            } else {
                assert_eq!(out.unwrap(), want(&[vec![i, i]]), "call {i}");
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_caller_that_goes_away_is_skipped_and_stalls_nobody() {
        let (batcher, passes) = fake(50);
        let busy = call(&batcher, vec![vec![1]]);
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        // Queued behind the busy pass, then abandoned: its 7 texts are never computed.
        let gone = call(&batcher, vec![vec![2]; 7]);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        gone.abort();
        let stays = call(&batcher, vec![vec![3, 3]]);
        assert_eq!(busy.await.unwrap().unwrap(), want(&[vec![1]]));
        assert_eq!(stays.await.unwrap().unwrap(), want(&[vec![3, 3]]));
        assert_eq!(passes.lock().unwrap().clone(), [1, 1]);
    }

    #[tokio::test]
    async fn a_dropped_batcher_finishes_what_is_queued() {
        let (batcher, _) = fake(0);
        let out = batcher.embed(vec![vec![4]]).await.unwrap();
        assert_eq!(out, want(&[vec![4]]));
        drop(batcher);
    }

    #[test]
    fn a_call_over_the_bounds_runs_alone() {
        let bounds = Bounds {
            max_tokens: 10,
            max_texts: 1,
        };
        let mut pending = VecDeque::new();
        let (big, _a) = request(&[50, 50]);
        let (small, _b) = request(&[1]);
        pending.push_back(big);
        pending.push_back(small);
        assert_eq!(take_batch(&mut pending, bounds).len(), 1);
        assert_eq!(take_batch(&mut pending, bounds).len(), 1);
    }
}
