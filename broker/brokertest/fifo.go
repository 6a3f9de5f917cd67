package brokertest

// fifoTests will hold the FIFO semantics of issue 3, each a testCase like
// the others (queues named "*.fifo" with FifoQueue=true):
//
//   - sends: MessageGroupId required (ErrMissingParameter), a dedup id or
//     ContentBasedDeduplication required, per-message DelaySeconds refused
//     (ErrInvalidParameterValue), SequenceNumber increasing per group;
//   - the dedup window (5 min on the clock, even after delete; scope queue or
//     messageGroup) and PurgeQueue clearing it;
//   - the group lock while any message of the group is in flight, strict
//     order within a group, several messages of one group per receive;
//   - ReceiveRequestAttemptId retries within 5 min;
//   - FIFO receipts: delete after the lease expired gives ErrInvalidParameterValue;
//   - redrive: FIFO↔FIFO only, the dedup id replaced by the MessageId on the move;
//   - the in-flight cap answering no messages instead of ErrOverLimit;
//   - restart: group locks, dedup ids and sequence numbers survive.
var fifoTests = []testCase{}
