package sqs

import (
	"strings"

	"github.com/sluicemq/sluice/broker/model"
)

// The redrive actions: ListDeadLetterSourceQueues, and the message move
// tasks StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask
// (every backend runs them). The backend knows queues by name; ARNs and
// task handles are made and read here.

type listDeadLetterSourceQueuesInput struct {
	queueRef
	NextToken  string  `json:"NextToken"`
	MaxResults *number `json:"MaxResults"`
}

type listDeadLetterSourceQueuesOutput struct {
	// QueueUrls is required in the model (and lower-case in JSON): always sent.
	QueueUrls []string `json:"queueUrls" xml:"QueueUrl"`
	NextToken string   `json:"NextToken,omitempty" xml:"NextToken,omitempty"`
}

type startMoveTaskInput struct {
	SourceArn                    string  `json:"SourceArn"`
	DestinationArn               string  `json:"DestinationArn"`
	MaxNumberOfMessagesPerSecond *number `json:"MaxNumberOfMessagesPerSecond"`
}

type startMoveTaskOutput struct {
	TaskHandle string `json:"TaskHandle" xml:"TaskHandle"`
}

type listMoveTasksInput struct {
	SourceArn  string  `json:"SourceArn"`
	MaxResults *number `json:"MaxResults"`
}

// moveTaskEntry is a ListMessageMoveTasksResultEntry.
type moveTaskEntry struct {
	TaskHandle                        string `json:"TaskHandle,omitempty" xml:"TaskHandle,omitempty"`
	Status                            string `json:"Status" xml:"Status"`
	SourceArn                         string `json:"SourceArn" xml:"SourceArn"`
	DestinationArn                    string `json:"DestinationArn,omitempty" xml:"DestinationArn,omitempty"`
	MaxNumberOfMessagesPerSecond      *int   `json:"MaxNumberOfMessagesPerSecond,omitempty" xml:"MaxNumberOfMessagesPerSecond,omitempty"`
	ApproximateNumberOfMessagesMoved  int64  `json:"ApproximateNumberOfMessagesMoved" xml:"ApproximateNumberOfMessagesMoved"`
	ApproximateNumberOfMessagesToMove int64  `json:"ApproximateNumberOfMessagesToMove" xml:"ApproximateNumberOfMessagesToMove"`
	FailureReason                     string `json:"FailureReason,omitempty" xml:"FailureReason,omitempty"`
	StartedTimestamp                  int64  `json:"StartedTimestamp" xml:"StartedTimestamp"`
}

type listMoveTasksOutput struct {
	Results []moveTaskEntry `json:"Results" xml:"ListMessageMoveTasksResultEntry"`
}

type cancelMoveTaskInput struct {
	TaskHandle string `json:"TaskHandle"`
}

type cancelMoveTaskOutput struct {
	ApproximateNumberOfMessagesMoved int64 `json:"ApproximateNumberOfMessagesMoved" xml:"ApproximateNumberOfMessagesMoved"`
}

func queryListDeadLetterSourceQueues(p params) (*listDeadLetterSourceQueuesInput, error) {
	return &listDeadLetterSourceQueuesInput{queueRef: queryQueueRef(p), NextToken: p.str("NextToken"), MaxResults: p.num("MaxResults")}, nil
}

func queryStartMoveTask(p params) (*startMoveTaskInput, error) {
	return &startMoveTaskInput{
		SourceArn: p.str("SourceArn"), DestinationArn: p.str("DestinationArn"),
		MaxNumberOfMessagesPerSecond: p.num("MaxNumberOfMessagesPerSecond"),
	}, nil
}

func queryListMoveTasks(p params) (*listMoveTasksInput, error) {
	return &listMoveTasksInput{SourceArn: p.str("SourceArn"), MaxResults: p.num("MaxResults")}, nil
}

func queryCancelMoveTask(p params) (*cancelMoveTaskInput, error) {
	return &cancelMoveTaskInput{TaskHandle: p.str("TaskHandle")}, nil
}

// listDeadLetterSourceQueues pages through the queues whose RedrivePolicy
// names the queue, in name order, with ListQueues's NextToken rules.
func (h *Handler) listDeadLetterSourceQueues(c *call, in *listDeadLetterSourceQueuesInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	limit, paged, err := in.MaxResults.get("MaxResults")
	if err != nil {
		return nil, err
	}
	if paged && (limit < 1 || limit > maxListQueues) {
		return nil, invalidValue(limit, "MaxResults", "MaxResults must be an integer between 1 and 1000.")
	}
	if !paged {
		limit = maxListQueues
	}
	after := ""
	if in.NextToken != "" {
		if after, err = decodeListToken(in.NextToken); err != nil {
			return nil, err
		}
	}
	qs, err := h.broker.DeadLetterSources(c.ctx, name, after)
	if err != nil {
		return nil, err
	}
	out := &listDeadLetterSourceQueuesOutput{QueueUrls: []string{}}
	last := ""
	for _, q := range qs {
		if len(out.QueueUrls) == int(limit) {
			if paged {
				out.NextToken = encodeListToken(last)
			}
			break
		}
		out.QueueUrls = append(out.QueueUrls, h.queueURL(c, h.broker.OwnerAccount(q), q.Name))
		last = q.Name
	}
	return out, nil
}

// queueOfARN returns the name of the queue an ARN of this broker's region
// names, or false, and names the ARN's account as the queue's owner
// (setOwner; the broker decides whether the caller may act on it).
func (h *Handler) queueOfARN(c *call, arn string) (string, bool) {
	name, ok := model.QueueNameFromARN(arn)
	if !ok {
		return "", false
	}
	account := strings.Split(arn, ":")[4] // QueueNameFromARN checked the 6 parts
	if h.arn(account, name) != arn || account != c.account && !isAccountID(account) {
		return "", false
	}
	c.setOwner(account)
	return name, true
}

func (h *Handler) startMoveTask(c *call, in *startMoveTaskInput) (any, error) {
	if in.SourceArn == "" {
		return nil, missing("SourceArn")
	}
	rate, given, err := in.MaxNumberOfMessagesPerSecond.get("MaxNumberOfMessagesPerSecond")
	if err != nil {
		return nil, err
	}
	if given && (rate < 1 || rate > model.MaxMoveRate) {
		return nil, invalidValue(rate, "MaxNumberOfMessagesPerSecond", "must be between 1 and 500, if provided.")
	}
	req := model.MoveTaskRequest{MaxPerSecond: int(rate)}
	var ok bool
	if req.Source, ok = h.queueOfARN(c, in.SourceArn); !ok {
		return nil, model.MoveSourceNotFoundError()
	}
	c.queue = req.Source
	if in.DestinationArn != "" {
		// The destination is a queue of the source's account.
		req.Destination, ok = model.QueueNameFromARN(in.DestinationArn)
		if !ok || h.arn(h.ownerOf(c), req.Destination) != in.DestinationArn {
			return nil, model.MoveDestinationNotFoundError()
		}
	}
	task, err := h.broker.StartMoveTask(c.ctx, req)
	if err != nil {
		return nil, err
	}
	return &startMoveTaskOutput{TaskHandle: model.EncodeTaskHandle(task.ID, h.arn(h.ownerOf(c), task.Source))}, nil
}

func (h *Handler) listMoveTasks(c *call, in *listMoveTasksInput) (any, error) {
	if in.SourceArn == "" {
		return nil, missing("SourceArn")
	}
	limit, given, err := in.MaxResults.get("MaxResults")
	if err != nil {
		return nil, err
	}
	if !given {
		limit = model.DefaultListMoveTasks
	}
	if limit < 1 || limit > model.MaxListMoveTasks {
		return nil, invalidValue(limit, "MaxResults", "must be between 1 and 10, if provided.")
	}
	source, ok := h.queueOfARN(c, in.SourceArn)
	if !ok {
		return nil, model.MoveSourceNotFoundError()
	}
	c.queue = source
	owner := h.ownerOf(c)
	tasks, err := h.broker.ListMoveTasks(c.ctx, source, int(limit))
	if err != nil {
		return nil, err
	}
	out := &listMoveTasksOutput{Results: make([]moveTaskEntry, 0, len(tasks))}
	for _, t := range tasks {
		e := moveTaskEntry{
			Status: string(t.Status), SourceArn: h.arn(owner, t.Source),
			ApproximateNumberOfMessagesMoved: t.Moved, ApproximateNumberOfMessagesToMove: t.ToMove,
			FailureReason: t.FailureReason, StartedTimestamp: t.StartedAt.UnixMilli(),
		}
		if t.Status == model.MoveTaskRunning {
			e.TaskHandle = model.EncodeTaskHandle(t.ID, h.arn(owner, t.Source))
		}
		if t.Destination != "" {
			e.DestinationArn = h.arn(owner, t.Destination)
		}
		if t.MaxPerSecond > 0 {
			rate := t.MaxPerSecond
			e.MaxNumberOfMessagesPerSecond = &rate
		}
		out.Results = append(out.Results, e)
	}
	return out, nil
}

func (h *Handler) cancelMoveTask(c *call, in *cancelMoveTaskInput) (any, error) {
	if in.TaskHandle == "" {
		return nil, missing("TaskHandle")
	}
	id, sourceARN, err := model.DecodeTaskHandle(in.TaskHandle)
	if err != nil {
		return nil, err
	}
	source, ok := h.queueOfARN(c, sourceARN)
	if !ok {
		return nil, model.MoveSourceNotFoundError()
	}
	task, err := h.broker.CancelMoveTask(c.ctx, source, id)
	if err != nil {
		return nil, err
	}
	return &cancelMoveTaskOutput{ApproximateNumberOfMessagesMoved: task.Moved}, nil
}
