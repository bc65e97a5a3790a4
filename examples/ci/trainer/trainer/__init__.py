"""The CI smoke trainer: no TensorFlow, so the emulator runs it in seconds."""
