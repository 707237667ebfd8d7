"""Reported numbers: other people's result files, kept in this repository unchanged under a
folder that names their source and commit, read as they are and shown on pages through data
regions, labelled as reported and never as measured here."""
