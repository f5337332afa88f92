#!/bin/sh
echo "oracle: the model disagrees at step 7" >&2
exit 3
