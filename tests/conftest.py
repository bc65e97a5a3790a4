pytest_plugins = ["tests.gcs_emulator"]
