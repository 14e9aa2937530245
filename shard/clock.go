package shard

import "time"

var timeNow = time.Now
