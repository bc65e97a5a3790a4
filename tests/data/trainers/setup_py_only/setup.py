from setuptools import find_packages, setup

setup(name="setup-py-trainer", version="0.2.0", packages=find_packages(include=["trainer*"]))
