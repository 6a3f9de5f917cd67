package broker

import "github.com/sluicemq/sluice/broker/model"

// OtherAccountError is the error for a queue URL, request path or
// QueueOwnerAWSAccountId naming account, when the broker serves only the
// account served: no queue of another account exists here.
func OtherAccountError(account, served string) error {
	return model.Errorf(model.ErrQueueDoesNotExist, "The specified queue does not exist: it would belong to account %s, and this broker serves account %s only.", account, served)
}

// AccessDeniedError is the error for a caller that may not take action act
// on queue name of account owner (the access rule, access.go).
func AccessDeniedError(owner, name string, act model.Action) error {
	return model.Errorf(model.ErrAccessDenied, "Access to the queue %s of account %s is denied: its policy grants your account no %s.", name, owner, act)
}
