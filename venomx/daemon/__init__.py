"""The daemon: an asyncio reactor that owns all state and never blocks."""
