package model

// Action is an SQS action name, as a queue policy grants it.
type Action string

// The actions the access rule tells apart. The batch forms share their
// single form's action (AWS: granting SendMessage grants SendMessageBatch).
const (
	ActionSendMessage                Action = "SendMessage"
	ActionReceiveMessage             Action = "ReceiveMessage"
	ActionDeleteMessage              Action = "DeleteMessage"
	ActionChangeMessageVisibility    Action = "ChangeMessageVisibility"
	ActionGetQueueAttributes         Action = "GetQueueAttributes"
	ActionGetQueueURL                Action = "GetQueueUrl"
	ActionListDeadLetterSourceQueues Action = "ListDeadLetterSourceQueues"
	ActionPurgeQueue                 Action = "PurgeQueue"
	// The owner's only.
	ActionCreateQueue        Action = "CreateQueue"
	ActionDeleteQueue        Action = "DeleteQueue"
	ActionSetQueueAttributes Action = "SetQueueAttributes"
	ActionListQueueTags      Action = "ListQueueTags"
	ActionTagQueue           Action = "TagQueue"
	ActionUntagQueue         Action = "UntagQueue"
	ActionAddPermission      Action = "AddPermission"
	ActionRemovePermission   Action = "RemovePermission"
	ActionStartMoveTask      Action = "StartMessageMoveTask"
	ActionListMoveTasks      Action = "ListMessageMoveTasks"
	ActionCancelMoveTask     Action = "CancelMessageMoveTask"
	// Sluice's own controls (the native API): the owner's only.
	ActionBrowse         Action = "Browse"
	ActionDeleteMessages Action = "DeleteMessages"
)

// crossAccountActions are the actions another account may be granted. AWS
// documents the others (AddPermission, CancelMessageMoveTask, CreateQueue,
// DeleteQueue, ListMessageMoveTasks, ListQueues, ListQueueTags,
// RemovePermission, SetQueueAttributes, StartMessageMoveTask, TagQueue,
// UntagQueue) as ones cross-account permissions do not apply to.
var crossAccountActions = map[Action]bool{
	ActionSendMessage: true, ActionReceiveMessage: true, ActionDeleteMessage: true,
	ActionChangeMessageVisibility: true, ActionGetQueueAttributes: true, ActionGetQueueURL: true,
	ActionListDeadLetterSourceQueues: true, ActionPurgeQueue: true,
}

// CrossAccountAction reports whether a queue policy can grant act to
// another account than the queue's owner.
func CrossAccountAction(act Action) bool { return crossAccountActions[act] }
