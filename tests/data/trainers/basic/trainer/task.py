"""Entry module (`python -m trainer.task`); the packaging tests only need it to exist."""


def main() -> None:
    print("training")


if __name__ == "__main__":
    main()
