"""The conversation: typed events and the one writer that records them.

Everything that appears in a conversation — the operator's message, the assistant's answer, a
retrieval, a tool call and its decision, a UI notice — is a typed event (``events.py``) written
by one ``Conversation`` (``writer.py``) to the NDJSON transcript, and handed to every subscriber
(the TUI's transcript pane, a headless renderer) as the same entry that was written. Nothing tails
the file to find out what happened.
"""

from services.conversation.events import (
    AssistantAnswer,
    Compaction,
    ContextReport,
    ConversationEvent,
    Notice,
    RetrievalSet,
    ToolCallRecord,
    UserMessage,
)
from services.conversation.writer import Conversation, Subscriber

__all__ = [
    "AssistantAnswer",
    "Compaction",
    "ContextReport",
    "Conversation",
    "ConversationEvent",
    "Notice",
    "RetrievalSet",
    "Subscriber",
    "ToolCallRecord",
    "UserMessage",
]
