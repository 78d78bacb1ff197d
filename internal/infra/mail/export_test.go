package mail

// RetryAfter is retryAfter, for the schedule's test.
var RetryAfter = retryAfter
