"""What the lessons' measurement runs share: peers, checks on the device, the two compilers side by side."""
