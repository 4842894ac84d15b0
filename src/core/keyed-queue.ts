// One operation at a time per key, in call order; a failed one does not stop the next. Holds only keys with work
// pending. Used for a task's journal appends (the commit log records each one's offset) and a repository's
// worktree changes (git's own `worktree add` is not safe beside another).
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, op: () => Promise<T>): Promise<T> {
    const run = (this.tails.get(key) ?? Promise.resolve()).then(op, op);
    const tail = run.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => this.tails.get(key) === tail && this.tails.delete(key));
    return run;
  }

  /** Resolves once everything queued so far has run. */
  async idle(): Promise<void> {
    await Promise.all(this.tails.values());
  }
}
