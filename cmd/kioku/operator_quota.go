package main

import (
	"context"
	"strconv"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
)

// quotaGet shows an app's usage of today against the daily quotas.
func quotaGet(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		u, err := e.c.GetQuotaUsage(ctx, &kiokuv1.GetQuotaUsageRequest{Name: completeName(e.arg, "/quotaUsage")})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(u)
		}
		return e.fields(
			[2]string{"name", u.GetName()},
			[2]string{"day (UTC)", u.GetDay()},
			[2]string{"generations", ofQuota(u.GetGenerations(), u.GetGenerationQuota())},
			[2]string{"model tokens", ofQuota(u.GetTokens(), u.GetTokenQuota())},
			[2]string{"resets", ts(u.GetResetTime())},
		)
	}
}

// ofQuota writes a usage with its quota: "3 of 100", or "3 (no quota)".
func ofQuota(used, quota int64) string {
	if quota <= 0 {
		return strconv.FormatInt(used, 10) + " (no quota)"
	}
	return strconv.FormatInt(used, 10) + " of " + strconv.FormatInt(quota, 10)
}
