package videos

// PollQuery is the statement a poll the cache cannot answer runs, with ? placeholders.
const PollQuery = pollQuery
