"""A Celery app on kombu's SQS transport, pointed at a sluice broker.

Used by e2e/clients_celery_test.go with Debian's python3-celery 5.2 and
python3-kombu 5.2 under /usr/bin/python3. Configured from the environment:
  SLUICE_BROKER_URL    sqs://AKID:SECRET@127.0.0.1:PORT
  SLUICE_QUEUE_PREFIX  prefix kombu puts before every queue name
  SLUICE_QUEUE         the task queue ("tasks", or "tasks.fifo" for a FIFO queue)
The task writes a file, so the test needs no result backend.
"""
import os

from celery import Celery

app = Celery("sluicetasks", broker=os.environ["SLUICE_BROKER_URL"])
app.conf.update(
    broker_transport_options={
        "region": "us-east-1",
        "is_secure": False,  # http://, to the host and port of the broker URL
        "queue_name_prefix": os.environ["SLUICE_QUEUE_PREFIX"],
        "wait_time_seconds": 2,  # long polling
        "visibility_timeout": 30,
        "polling_interval": 0.2,
    },
    broker_connection_retry_on_startup=True,
    task_default_queue=os.environ["SLUICE_QUEUE"],
    task_ignore_result=True,
    result_backend=None,
    task_acks_late=True,  # delete the SQS message only after the task ran
    worker_enable_remote_control=False,  # no fanout pidbox queues
    worker_send_task_events=False,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
)


@app.task(name="sluice.record")
def record(outdir, index, payload):
    """Appends index to outdir/order.log and writes payload to outdir/done-INDEX
    (atomically: the test polls for that file)."""
    with open(os.path.join(outdir, "order.log"), "a", encoding="utf-8") as f:
        f.write("%d\n" % index)
    tmp = os.path.join(outdir, ".done-%d.tmp" % index)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(payload)
    os.rename(tmp, os.path.join(outdir, "done-%d" % index))
