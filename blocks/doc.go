// Package blocks keeps core memory blocks: MemGPT's working context, as
// Letta ships it as memory blocks. A block is a short labelled text that
// an agent keeps in every prompt and edits itself: a user's own blocks
// (apps/{app}/users/{user}/blocks/{label}, such as "human") and the
// blocks an app shares with all its users (apps/{app}/blocks/{label},
// such as "persona").
//
// Service validates every input and computes each change; a Store keeps
// the blocks and their revisions (blockstest is the suite every backend
// runs: internal/blockstore/sqlite and internal/blockstore/firestore).
//
// The rules:
//
//   - A block's value never holds more characters (Unicode code points)
//     than its Limit: 1 to MaxLimit, DefaultLimit unless set. Update
//     refuses a value past it (Invalid, naming the field and the limit);
//     Append and Replace, the agent's edits, refuse an edit past it with
//     FailedPrecondition, naming the limit and the current size, so that
//     a model can shorten what it writes or replace old text instead.
//   - ReadOnly refuses the agent's edits (Append, Replace) with
//     FailedPrecondition; Update, the application's write, still changes
//     the block, read-only or not.
//   - Update creates a block that does not exist. With an expected
//     revision, the block must be at it (0: must not exist), or the
//     update is FailedPrecondition and writes nothing, as AppendEvent's
//     expected sequence is. Without one, and always for Append and
//     Replace, a write that loses a race with another is computed again
//     on what that one left, so no edit is lost.
//   - Replace needs old content that occurs exactly once in the value:
//     absent or ambiguous, it is FailedPrecondition saying which.
//   - Each change is a Revision (the block as it left it); a block keeps
//     its latest MaxRevisions. Deleting a block removes its revisions.
//   - An owner (a user, or the app) has at most MaxBlocks blocks.
//   - With a Redactor configured, values written (Update's value,
//     Append's content, Replace's new content) are redacted as memories
//     are, when the app's pii_redaction is on.
package blocks
