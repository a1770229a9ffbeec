// Package memoryfiles is the memory file tool's backend: each user of an
// app has a directory, /memories, in which a model keeps its own notes as
// files through the six commands of Anthropic's memory tool (view, create,
// str_replace, insert, delete, rename). An application forwards the tool's
// input object verbatim to Service.Execute and returns its answer to the
// model unchanged; kioku keeps the files per user, durable, on either
// store, with revisions.
//
// # The tool's answers
//
// Execute follows the memory tool's documentation (the "Tool commands"
// section of Anthropic's memory tool page): its input parameters, and the
// texts of its answers where the documentation spells them out, word for
// word:
//
//	view (a directory)   Here're the files and directories up to 2 levels
//	                     deep in {path}, excluding hidden items and
//	                     node_modules:\n{size}\t{path}\n{size}\t{path}/{name}...
//	view (a file)        Here's the content of {path} with line numbers:\n
//	                     {n, 6 wide, right aligned}\t{line}...
//	view (missing)       The path {path} does not exist. Please provide a valid path.
//	create               File created successfully at: {path}
//	                     Error: File {path} already exists
//	str_replace          The memory file has been edited. ... (a snippet)
//	                     Error: The path {path} does not exist. Please provide a valid path.
//	                     No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}.
//	                     No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: {lines}. Please ensure it is unique
//	insert               The file {path} has been edited.
//	                     Error: The path {path} does not exist
//	                     Error: Invalid `insert_line` parameter: {n}. It should be within the range of lines of the file: [0, {lines}]
//	delete               Successfully deleted {path}
//	                     Error: The path {path} does not exist
//	rename               Successfully renamed {old_path} to {new_path}
//	                     Error: The path {old_path} does not exist
//	                     Error: The destination {new_path} already exists
//
// Where the documentation leaves a choice, this package decides, and says
// so here:
//
//   - Errors it does not spell out start with "Error: " and say what to do.
//     view_range is checked with the messages of Anthropic's reference
//     text editor tool (a list of two integers, the first within [1,
//     lines], the second -1 or from the first to the last line); so is a
//     view_range on a directory. A missing parameter is "Error: Parameter
//     `X` is required for command: C"; an unknown command names the six.
//     Parameters a command does not take are ignored.
//   - A file's lines are its content split at newlines, where a final
//     newline ends the last line rather than starting an empty one: "a\nb\n"
//     has two lines, the empty file none. view, insert's line numbers and
//     str_replace's snippet all count so.
//   - insert puts insert_text's lines after line insert_line (0: before
//     the first); a final newline of insert_text ends its last line; the
//     file keeps its final newline, and gains one when the text goes at
//     the end and ends with one. An empty insert_text inserts one empty
//     line.
//   - str_replace replaces the one occurrence of old_str (which must not
//     be empty); occurrences are counted without overlap, and the lines of
//     "Multiple occurrences" are those where one starts, each once,
//     separated by ", " (the first 100, then " and N more"). The snippet shows the lines the new text spans
//     with two more on either side, after the header "The memory file has
//     been edited. Here is the snippet showing the change (with line
//     numbers):", as Anthropic's SDKs write it.
//   - Directories are implicit, as the tool shows them: a directory exists
//     while a file is below it (Root always exists), create makes the
//     directories above a file, and a directory whose last file goes is
//     gone (so there is no empty directory, and create refuses a path
//     ending with a slash). The listing goes two levels below the viewed
//     directory, in tree order (names sorted on each level, a directory
//     followed by what it holds, its name ending with "/"); a directory's
//     size is the total of the files below it; sizes are written as du -h
//     writes them (512B, 4.0K, 1.5K, 12K, 1.2M). Hidden items (a name
//     starting with ".") and node_modules are left out of listings (and of
//     the sizes), but can be viewed by path.
//   - delete of a directory deletes every file below it; Root itself can
//     be neither deleted nor renamed. rename moves a file or a directory
//     with everything below it; its destination must not exist (no
//     overwriting), nor be below the source.
//   - A file's content is text: a NUL character is refused.
//   - The documentation's limit of 999,999 lines per viewed file is never
//     reached: MaxFileBytes keeps every file far below it.
//   - view of a file answers at most MaxViewBytes of numbered lines
//     (whole lines): a whole file of ordinary lines fits, but line
//     numbers would make a file of empty lines ten times its size, so
//     such an answer stops at a line and ends with "[The view stops at
//     line N of M: ... View the rest with view_range, from [N+1, -1].]".
//
// # Paths
//
// Every path is confined to Root after the checks of CleanPath: a path
// outside Root, ".." and "." segments, percent-encoding, backslashes,
// control characters, invisible format characters (zero-width spaces,
// bidirectional overrides; a zero-width joiner only inside an emoji
// sequence), line and paragraph separators, look-alikes of the slash,
// segments of nothing but spaces, forms that Unicode normalisation turns
// into dot segments or slashes, and names a file system turns into
// another file (as symbolic links do) are refused with an answer that
// says why and names the character (U+XXXX) ("Error: The path ... is not
// allowed: it ..."), and nothing is written. Nothing is ever resolved:
// what is stored is the path the model wrote in Unicode normal form C
// (so "café" typed either way is one file), so no consumer that decodes
// or maps paths onto a file system can be led out of the directory.
//
// # Limits
//
// A file holds at most MaxFileBytes (100 KiB), a user's files MaxUserBytes
// (4 MiB) in all and MaxFiles (1,000) files; a path at most MaxPathBytes
// and MaxPathDepth segments. A command that would pass a limit is refused
// with an answer naming it, and writes nothing. The history a user's
// files keep is bounded by MaxHistoryBytes, which refuses nothing (see
// below), and view's answer by MaxViewBytes.
//
// # Revisions and deletion
//
// Every change records a Revision of the file (CREATED, EDITED, RENAMED,
// DELETED; those that change the content hold it), numbered from 1; a
// file's id stays through renames, so its revisions follow it. Each file
// keeps its latest MaxRevisions revisions. A deleted file stays (invisible
// to the tool) with its revisions, up to MaxDeletedFiles per user: a
// deletion that passes it removes the oldest deleted files for good.
//
// That history is bounded in bytes too: the content of the revisions
// kept and of the deleted files kept (Usage.History) stays within
// MaxHistoryBytes, beside the MaxUserBytes of the files themselves. A
// command never fails for history: one that would pass the bound removes
// the oldest history first, the earliest deleted files (whole), then the
// older revisions of the files it changes, then those of the user's other
// files, each file keeping its newest revision. So one user's memory files
// hold at most MaxUserBytes + MaxHistoryBytes (8 MiB) of content, however
// many commands wrote them.
//
// # Concurrency
//
// Each write of a user's files moves the user's Usage to a new version,
// and applies only if the version is still the one it was computed from
// (Store.Write); otherwise Execute computes the command again on what the
// other write left. Two str_replace on one file never lose an update: the
// second one either applies to the first one's result or fails the way it
// would have on it ("did not appear verbatim").
//
// # Stores
//
// Store persists files, revisions and usages; package memoryfilestest is
// its conformance suite, run in this package on the SQLite store and by
// every backend (internal/memoryfilestore/sqlite and firestore).
package memoryfiles
