"""Test helpers shared by every layer (not a test module)."""
