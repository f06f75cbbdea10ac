"""The interruption queue (SQS): receive, delete, release messages."""

from __future__ import annotations

from actuator_svc.cloud.aws_calls import AwsCalls
from actuator_svc.cloud.provider import QueueMessage


class SqsQueueCalls(AwsCalls):
    """GetQueueUrl, ReceiveMessage, DeleteMessage, ChangeMessageVisibility."""

    async def queue_url(self, queue: str) -> str:
        """A queue URL from a name or URL."""
        if queue.startswith(("http://", "https://")):
            return queue
        response = await self._call("GetQueueUrl", self._sqs.get_queue_url, QueueName=queue)
        return str(response["QueueUrl"])

    async def receive_messages(self, queue_url: str, wait_seconds: int) -> list[QueueMessage]:
        """Long-poll up to 10 messages."""
        response = await self._call(
            "ReceiveMessage",
            self._sqs.receive_message,
            QueueUrl=queue_url,
            WaitTimeSeconds=wait_seconds,
            MaxNumberOfMessages=10,
        )
        return [
            QueueMessage(receipt_handle=m["ReceiptHandle"], body=m.get("Body", ""))
            for m in response.get("Messages", [])
        ]

    async def delete_message(self, queue_url: str, receipt_handle: str) -> None:
        """Delete one received message."""
        await self._call(
            "DeleteMessage",
            self._sqs.delete_message,
            QueueUrl=queue_url,
            ReceiptHandle=receipt_handle,
        )

    async def release_message(self, queue_url: str, receipt_handle: str) -> None:
        """Make one received message visible again at once."""
        await self._call(
            "ChangeMessageVisibility",
            self._sqs.change_message_visibility,
            QueueUrl=queue_url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=0,
        )
