package broker

import "github.com/sluicemq/sluice/broker/model"

// count reports n events to the observer, when there is one.
func (b *Broker) count(queue string, c model.Counter, n int) {
	if b.cfg.Observer != nil && n > 0 {
		b.cfg.Observer.Count(queue, c, n)
	}
}
