"""The pneumatic soft snake (issue 16): the two-chamber bending link and its model."""
